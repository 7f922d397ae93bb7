package timer

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fom-go/fom/schedule"
	"github.com/fom-go/fom/store"
)

// Errors of the timer service; test them with errors.Is.
var (
	ErrDuplicate   = store.ErrDuplicateTimer
	ErrNotFound    = errors.New("fom: timer not found")
	ErrUnknownKind = errors.New("fom: no handler for the timer's kind")
	ErrInvalid     = errors.New("fom: invalid timer")
	ErrQuota       = errors.New("fom: the namespace's timer quota is used up")
	ErrNotDead     = errors.New("fom: the fire is not dead")
	ErrStopped     = errors.New("fom: the timer service is stopped")
)

// Misfire policies: what a recurring timer does with fires it missed
// while no process ran (downtime).
const (
	MisfireOnce = "once" // the first missed fire is delivered, once
	MisfireSkip = "skip" // missed fires are skipped; the next is the first not yet past
)

// Limits on names and values.
const (
	MaxNameLen    = 200
	MaxPayloadLen = 256 << 10
	// MaxDueIn is how far ahead a one-shot may be due.
	MaxDueIn = 100 * 365 * 24 * time.Hour
)

// Spec is what a timer does: a one-shot (At) or a recurring one (Cron),
// of a Kind whose handler gets its Payload.
type Spec struct {
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"` // unique in its namespace
	Kind      string          `json:"kind"`
	At        time.Time       `json:"at,omitzero"`   // one-shot: when
	Cron      string          `json:"cron,omitzero"` // recurring: robfig/cron syntax, seconds optional, CRON_TZ= honoured
	Payload   json.RawMessage `json:"payload,omitempty"`
	Disabled  bool            `json:"disabled,omitempty"` // created disabled
	// Policy overrides of the kind's defaults (zero: the kind's).
	Retry   Retry         `json:"retry,omitzero"`
	Timeout time.Duration `json:"timeout,omitzero"` // an attempt's deadline
	Misfire string        `json:"misfire,omitzero"` // MisfireOnce (default) or MisfireSkip
}

// Retry is a retry policy: up to MaxAttempts attempts, the n-th retry
// after about MinBackoff·2^(n-1) (jittered), at most MaxBackoff.
type Retry struct {
	MaxAttempts int           `json:"max_attempts,omitzero"`
	MinBackoff  time.Duration `json:"min_backoff,omitzero"`
	MaxBackoff  time.Duration `json:"max_backoff,omitzero"`
}

// DefaultRetry is a kind's retry policy unless it says otherwise.
func DefaultRetry() Retry {
	return Retry{MaxAttempts: 8, MinBackoff: time.Second, MaxBackoff: 10 * time.Minute}
}

// DefaultTimeout is an attempt's deadline unless the kind or the timer
// says otherwise.
const DefaultTimeout = 30 * time.Second

// Timer is a stored timer.
type Timer struct {
	ID string `json:"id"`
	Spec
	State   string    `json:"state"` // enabled, disabled, or done (a one-shot that fired)
	Version int64     `json:"version"`
	Next    time.Time `json:"next,omitzero"` // the next fire not yet made
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// Fire is one delivery of a timer: what a handler gets.
type Fire struct {
	TimerID   string          `json:"timer_id"`
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Kind      string          `json:"kind"`
	Payload   json.RawMessage `json:"payload"`
	Planned   time.Time       `json:"planned"`
	Attempt   int             `json:"attempt"` // 1-based
	// Key is the fire's idempotency key: "<timer id>:<planned Unix ms>",
	// the same on every attempt of the fire and never another fire's.
	Key string `json:"key"`
}

// KeyOf is the idempotency key of a timer's fire planned at planned.
func KeyOf(timerID string, planned time.Time) string {
	return timerID + ":" + strconv.FormatInt(planned.UnixMilli(), 10)
}

// Handler delivers a fire. A nil error is success; an error is retried
// with backoff until the last attempt, unless it is Permanent; a
// RetryAfter error asks for the next attempt no sooner than it says.
type Handler func(ctx context.Context, f Fire) error

// permanent marks an error not worth retrying.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as one a retry would not fix: the fire is dead at
// once.
func Permanent(err error) error { return permanent{err} }

// IsPermanent says whether err was marked Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// retryAfter asks for the next attempt no sooner than after.
type retryAfter struct {
	err   error
	after time.Duration
}

func (r retryAfter) Error() string { return r.err.Error() }
func (r retryAfter) Unwrap() error { return r.err }

// RetryAfter is err with the earliest the next attempt may come (an HTTP
// 429's Retry-After).
func RetryAfter(err error, after time.Duration) error { return retryAfter{err, after} }

// RetryAfterOf is the pause a RetryAfter error asks for.
func RetryAfterOf(err error) (time.Duration, bool) {
	var r retryAfter
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}

// SpecError is a bad spec: the field, the value and why.
type SpecError struct {
	Field, Value, Reason string
}

func (e *SpecError) Error() string {
	return fmt.Sprintf("fom: timer field %q value %q: %s", e.Field, e.Value, e.Reason)
}

func (e *SpecError) Unwrap() error { return ErrInvalid }

func bad(field, value, reason string) error {
	return &SpecError{Field: field, Value: value, Reason: reason}
}

// checkName refuses an empty, over-long or unprintable name.
func checkName(field, v string, required bool) error {
	switch {
	case v == "" && required:
		return bad(field, v, "required")
	case len(v) > MaxNameLen:
		return bad(field, v[:32]+"…", fmt.Sprintf("longer than %d bytes", MaxNameLen))
	case !utf8.ValidString(v):
		return bad(field, strconv.Quote(v), "not valid UTF-8")
	case strings.IndexFunc(v, func(r rune) bool { return unicode.IsControl(r) }) >= 0:
		return bad(field, strconv.Quote(v), "holds control characters")
	}
	return nil
}

// validate checks a spec; now is the service's clock.
func validate(s *Spec, now time.Time) error {
	if err := checkName("namespace", s.Namespace, false); err != nil {
		return err
	}
	if err := checkName("name", s.Name, true); err != nil {
		return err
	}
	if err := checkName("kind", s.Kind, true); err != nil {
		return err
	}
	switch {
	case s.At.IsZero() && s.Cron == "":
		return bad("at", "", "a timer needs a due time (at) or a cron spec (cron)")
	case !s.At.IsZero() && s.Cron != "":
		return bad("cron", s.Cron, "a timer has a due time (at) or a cron spec, not both")
	case !s.At.IsZero() && s.At.Sub(now) > MaxDueIn:
		return bad("at", s.At.UTC().Format(time.RFC3339), "more than 100 years ahead")
	case !s.At.IsZero() && s.At.Year() < 2000:
		return bad("at", s.At.UTC().Format(time.RFC3339), "before the year 2000")
	}
	if s.Cron != "" {
		p, err := schedule.CronPlan(s.Cron)
		if err != nil {
			return bad("cron", s.Cron, strings.TrimPrefix(err.Error(), "parse cron "+strconv.Quote(s.Cron)+": "))
		}
		if _, ok := p.Next(schedule.Round{Start: now}); !ok {
			return bad("cron", s.Cron, "never fires")
		}
	}
	if len(s.Payload) > MaxPayloadLen {
		return bad("payload", fmt.Sprintf("%d bytes", len(s.Payload)), fmt.Sprintf("larger than %d bytes", MaxPayloadLen))
	}
	if len(s.Payload) > 0 && !json.Valid(s.Payload) {
		v := string(s.Payload)
		if len(v) > 32 {
			v = v[:32] + "…"
		}
		return bad("payload", v, "not JSON")
	}
	switch {
	case s.Retry.MaxAttempts < 0 || s.Retry.MaxAttempts > 1000:
		return bad("retry.max_attempts", strconv.Itoa(s.Retry.MaxAttempts), "between 1 and 1000 (0: the kind's)")
	case s.Retry.MinBackoff < 0:
		return bad("retry.min_backoff", s.Retry.MinBackoff.String(), "negative")
	case s.Retry.MaxBackoff < 0 || (s.Retry.MaxBackoff > 0 && s.Retry.MaxBackoff < s.Retry.MinBackoff):
		return bad("retry.max_backoff", s.Retry.MaxBackoff.String(), "negative, or below min_backoff")
	case s.Timeout < 0 || (s.Timeout > 0 && s.Timeout < time.Millisecond) || s.Timeout > 24*time.Hour:
		return bad("timeout", s.Timeout.String(), "between 1ms and 24h (0: the kind's)")
	case s.Misfire != "" && s.Misfire != MisfireOnce && s.Misfire != MisfireSkip:
		return bad("misfire", s.Misfire, `"once" or "skip"`)
	}
	return nil
}

// newID is a timer id: 26 lowercase base32hex characters (whose order is
// their bytes'), time-ordered (the first 48 bits are the creation's Unix
// ms, the next 16 a sequence of the process's, the rest random), so a
// listing by id is by age.
func newID(now time.Time, seq uint16) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16|uint64(seq))
	rand.Read(b[8:])
	return idEncoding.EncodeToString(b[:])
}

// idEncoding is base32hex in lower case, without padding: ids sort as
// their bytes do. Never modified.
var idEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

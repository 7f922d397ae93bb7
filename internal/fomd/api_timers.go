package fomd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/fom-go/fom/timer"
	"github.com/fom-go/fom/timer/webhook"
)

// RetryIn is a timer's retry policy; fields left out keep the defaults
// (5 attempts, 1s to 1h).
type RetryIn struct {
	MaxAttempts int    `json:"max_attempts,omitempty" minimum:"0" maximum:"1000" doc:"attempts in all, the first included"`
	MinBackoff  string `json:"min_backoff,omitempty" doc:"pause before the first retry, doubled at each (Go duration, e.g. 1s)" example:"1s"`
	MaxBackoff  string `json:"max_backoff,omitempty" doc:"longest pause between attempts" example:"10m"`
}

// TimerIn creates a timer.
type TimerIn struct {
	Namespace string           `json:"namespace,omitempty" doc:"default: the token's namespace; required with the admin token"`
	Name      string           `json:"name" minLength:"1" maxLength:"200" doc:"unique in the namespace"`
	At        *time.Time       `json:"at,omitempty" doc:"one-shot: when (RFC 3339)"`
	Cron      string           `json:"cron,omitempty" doc:"recurring: a cron spec, seconds optional, CRON_TZ= honoured" example:"CRON_TZ=Europe/Paris 0 0 9 * * MON-FRI"`
	Callback  webhook.Callback `json:"callback"`
	Retry     *RetryIn         `json:"retry,omitempty"`
	Misfire   string           `json:"misfire,omitempty" enum:"once,skip" doc:"a recurring timer's fires missed while no instance ran: deliver the first once (default), or skip them"`
	Enabled   *bool            `json:"enabled,omitempty" doc:"default true"`
}

// RetryOut is a timer's retry policy as set (empty: the defaults).
type RetryOut struct {
	MaxAttempts int    `json:"max_attempts,omitempty"`
	MinBackoff  string `json:"min_backoff,omitempty"`
	MaxBackoff  string `json:"max_backoff,omitempty"`
}

// TimerOut is a timer.
type TimerOut struct {
	ID        string           `json:"id"`
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	At        *time.Time       `json:"at,omitempty"`
	Cron      string           `json:"cron,omitempty"`
	Callback  webhook.Callback `json:"callback"`
	Retry     RetryOut         `json:"retry"`
	Misfire   string           `json:"misfire"`
	Enabled   bool             `json:"enabled"`
	State     string           `json:"state" enum:"enabled,disabled,done" doc:"done: a one-shot that fired"`
	Version   int64            `json:"version"`
	Next      *time.Time       `json:"next,omitempty" doc:"the next fire not yet made"`
	Created   time.Time        `json:"created"`
	Updated   time.Time        `json:"updated"`
}

func durStr(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

func timerOut(t timer.Timer) TimerOut {
	o := TimerOut{ID: t.ID, Namespace: t.Namespace, Name: t.Name, Cron: t.Cron, Misfire: t.Misfire, Enabled: !t.Disabled, State: t.State,
		Version: t.Version, Created: t.Created.UTC(), Updated: t.Updated.UTC(),
		Retry: RetryOut{MaxAttempts: t.Retry.MaxAttempts, MinBackoff: durStr(t.Retry.MinBackoff), MaxBackoff: durStr(t.Retry.MaxBackoff)}}
	if o.Misfire == "" {
		o.Misfire = timer.MisfireOnce
	}
	if !t.At.IsZero() {
		at := t.At.UTC()
		o.At = &at
	}
	if !t.Next.IsZero() {
		n := t.Next.UTC()
		o.Next = &n
	}
	json.Unmarshal(t.Payload, &o.Callback)
	return o
}

// spec turns a request into a timer.Spec, checked: an error names the
// field.
func (s *Server) spec(in TimerIn) (timer.Spec, error) {
	sp := timer.Spec{Namespace: in.Namespace, Name: in.Name, Kind: webhook.Kind, Cron: in.Cron, Misfire: in.Misfire}
	if in.At != nil {
		sp.At = *in.At
	}
	if in.Enabled != nil {
		sp.Disabled = !*in.Enabled
	}
	cb, err := webhook.Check(in.Callback, s.guard)
	if err != nil {
		return sp, err
	}
	sp.Timeout = webhook.TimeoutOf(cb)
	if sp.Payload, err = json.Marshal(cb); err != nil {
		return sp, err
	}
	if r := in.Retry; r != nil {
		sp.Retry.MaxAttempts = r.MaxAttempts
		for _, d := range []struct {
			field, v string
			to       *time.Duration
		}{{"retry.min_backoff", r.MinBackoff, &sp.Retry.MinBackoff}, {"retry.max_backoff", r.MaxBackoff, &sp.Retry.MaxBackoff}} {
			if d.v == "" {
				continue
			}
			v, err := time.ParseDuration(d.v)
			if err != nil || v < 0 || v > 7*24*time.Hour {
				return sp, apiErr(http.StatusUnprocessableEntity, d.field, "%s %q: a Go duration from 0 to 168h, e.g. 30s", d.field, d.v)
			}
			*d.to = v
		}
	}
	return sp, nil
}

// namespaceFor is the namespace a request acts in: its token's, or the
// one named (the admin token), which must exist.
func (s *Server) namespaceFor(ctx context.Context, named string) (string, error) {
	p := principalOf(ctx)
	if !p.admin {
		if named != "" && named != p.namespace {
			return "", apiErr(http.StatusForbidden, "namespace", "namespace %q: this token acts only in namespace %q", named, p.namespace)
		}
		return p.namespace, nil
	}
	if named == "" {
		return "", apiErr(http.StatusUnprocessableEntity, "namespace", "namespace is required with the admin token")
	}
	if _, ok, err := s.ns.get(ctx, named); err != nil {
		return "", fromService(err)
	} else if !ok {
		return "", apiErr(http.StatusUnprocessableEntity, "namespace", "namespace %q does not exist (create it with POST /api/v1/namespaces)", named)
	}
	return named, nil
}

// timerOf reads a timer the request may see: another namespace's is not
// found, as one that does not exist.
func (s *Server) timerOf(ctx context.Context, id string) (timer.Timer, error) {
	t, err := s.timers.Get(ctx, id)
	if err != nil {
		return t, fromService(err)
	}
	p := principalOf(ctx)
	if t.Kind != webhook.Kind || (!p.admin && t.Namespace != p.namespace) {
		return t, apiErr(http.StatusNotFound, "id", "timer %q not found", id)
	}
	return t, nil
}

type timerBody struct {
	Body TimerOut
}

type idPath struct {
	ID string `path:"id" maxLength:"64"`
}

// bearer is an operation's security: a bearer token.
func bearer() []map[string][]string { return []map[string][]string{{"bearer": {}}} }

func (s *Server) registerTimers(api huma.API) {
	huma.Register(api, huma.Operation{OperationID: "create-timer", Method: http.MethodPost, Path: "/api/v1/timers", Summary: "Create a timer",
		Tags: []string{"timers"}, DefaultStatus: http.StatusCreated, Security: bearer(), MaxBodyBytes: s.cfg.MaxBody,
		Errors: []int{400, 401, 403, 409, 413, 422, 429}},
		func(ctx context.Context, in *struct{ Body TimerIn }) (*timerBody, error) {
			ns, err := s.namespaceFor(ctx, in.Body.Namespace)
			if err != nil {
				return nil, err
			}
			in.Body.Namespace = ns
			sp, err := s.spec(in.Body)
			if err != nil {
				return nil, fromService(err)
			}
			id, err := s.timers.Create(ctx, sp)
			if err != nil {
				return nil, fromService(err)
			}
			t, err := s.timers.Get(ctx, id)
			if err != nil {
				return nil, fromService(err)
			}
			return &timerBody{timerOut(t)}, nil
		})

	type batchIn struct {
		Body struct {
			Timers []TimerIn `json:"timers" minItems:"1" maxItems:"1000"`
		}
	}
	type batchOut struct {
		Body struct {
			IDs []string `json:"ids" doc:"the timers' ids, in the order given"`
		}
	}
	huma.Register(api, huma.Operation{OperationID: "create-timers", Method: http.MethodPost, Path: "/api/v1/timers/batch", Summary: "Create up to 1000 timers at once: all or none",
		Tags: []string{"timers"}, DefaultStatus: http.StatusCreated, Security: bearer(), MaxBodyBytes: max(s.cfg.MaxBody, 16<<20),
		Errors: []int{400, 401, 403, 409, 413, 422, 429}},
		func(ctx context.Context, in *batchIn) (*batchOut, error) {
			specs := make([]timer.Spec, len(in.Body.Timers))
			for i, t := range in.Body.Timers {
				ns, err := s.namespaceFor(ctx, t.Namespace)
				if err == nil {
					t.Namespace = ns
					specs[i], err = s.spec(t)
				}
				if err != nil {
					e := fromService(err).(*APIError)
					e.Err.Field = fmt.Sprintf("timers[%d].%s", i, e.Err.Field)
					e.Err.Message = fmt.Sprintf("timers[%d]: %s", i, e.Err.Message)
					return nil, e
				}
			}
			ids, err := s.timers.CreateMany(ctx, specs)
			if err != nil {
				return nil, fromService(err)
			}
			out := &batchOut{}
			out.Body.IDs = ids
			return out, nil
		})

	huma.Register(api, huma.Operation{OperationID: "get-timer", Method: http.MethodGet, Path: "/api/v1/timers/{id}", Summary: "Get a timer",
		Tags: []string{"timers"}, Security: bearer(), Errors: []int{401, 404}},
		func(ctx context.Context, in *idPath) (*timerBody, error) {
			t, err := s.timerOf(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return &timerBody{timerOut(t)}, nil
		})

	type timerListIn struct {
		Namespace string `query:"namespace" doc:"only this namespace's (a namespace token sees only its own)"`
		State     string `query:"state" enum:"enabled,disabled,done,dead" doc:"dead: timers with a dead fire, what needs attention"`
		Limit     int    `query:"limit" minimum:"0" maximum:"1000" doc:"default 100"`
		Cursor    string `query:"cursor" doc:"next_cursor of the previous page"`
	}
	type timerListOut struct {
		Body struct {
			Timers     []TimerOut `json:"timers"`
			NextCursor string     `json:"next_cursor,omitempty" doc:"empty after the last page"`
		}
	}
	huma.Register(api, huma.Operation{OperationID: "list-timers", Method: http.MethodGet, Path: "/api/v1/timers", Summary: "List timers, paged by cursor",
		Tags: []string{"timers"}, Security: bearer(), Errors: []int{401, 403, 422}},
		func(ctx context.Context, in *timerListIn) (*timerListOut, error) {
			ns := in.Namespace
			if p := principalOf(ctx); !p.admin {
				if ns != "" && ns != p.namespace {
					return nil, apiErr(http.StatusForbidden, "namespace", "namespace %q: this token sees only namespace %q", ns, p.namespace)
				}
				ns = p.namespace
			}
			ts, next, err := s.timers.List(ctx, timer.Filter{Namespace: ns, Kind: webhook.Kind, State: in.State, Cursor: in.Cursor, Limit: in.Limit})
			if err != nil {
				return nil, fromService(err)
			}
			out := &timerListOut{}
			out.Body.Timers = make([]TimerOut, len(ts))
			for i, t := range ts {
				out.Body.Timers[i] = timerOut(t)
			}
			out.Body.NextCursor = next
			return out, nil
		})

	type timerPatchIn struct {
		ID   string `path:"id" maxLength:"64"`
		Body struct {
			At       *time.Time `json:"at,omitempty" doc:"makes the timer a one-shot due then"`
			Cron     *string    `json:"cron,omitempty" doc:"makes the timer recurring"`
			Callback *struct {
				URL     *string            `json:"url,omitempty"`
				Method  *string            `json:"method,omitempty"`
				Headers *map[string]string `json:"headers,omitempty"`
				Body    json.RawMessage    `json:"body,omitempty"`
				Timeout *string            `json:"timeout,omitempty"`
			} `json:"callback,omitempty" doc:"the fields given replace the callback's"`
			Retry   *RetryIn `json:"retry,omitempty" doc:"replaces the retry policy"`
			Misfire *string  `json:"misfire,omitempty" enum:"once,skip"`
			Enabled *bool    `json:"enabled,omitempty"`
		}
	}
	huma.Register(api, huma.Operation{OperationID: "update-timer", Method: http.MethodPatch, Path: "/api/v1/timers/{id}", Summary: "Change a timer: fires not yet begun use the new version",
		Tags: []string{"timers"}, Security: bearer(), MaxBodyBytes: s.cfg.MaxBody, Errors: []int{400, 401, 404, 413, 422}},
		func(ctx context.Context, in *timerPatchIn) (*timerBody, error) {
			t, err := s.timerOf(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			cur := timerOut(t)
			next := TimerIn{Namespace: t.Namespace, Name: t.Name, At: cur.At, Cron: cur.Cron, Callback: cur.Callback, Misfire: cur.Misfire, Enabled: &cur.Enabled,
				Retry: &RetryIn{MaxAttempts: cur.Retry.MaxAttempts, MinBackoff: cur.Retry.MinBackoff, MaxBackoff: cur.Retry.MaxBackoff}}
			b := in.Body
			if b.At != nil && b.Cron != nil && *b.Cron != "" {
				return nil, apiErr(http.StatusUnprocessableEntity, "cron", "give at or cron, not both")
			}
			if b.At != nil {
				next.At, next.Cron = b.At, ""
			}
			if b.Cron != nil {
				next.Cron = *b.Cron
				if *b.Cron != "" {
					next.At = nil
				}
			}
			if c := b.Callback; c != nil {
				if c.URL != nil {
					next.Callback.URL = *c.URL
				}
				if c.Method != nil {
					next.Callback.Method = *c.Method
				}
				if c.Headers != nil {
					next.Callback.Headers = *c.Headers
				}
				if c.Body != nil {
					next.Callback.Body = c.Body
				}
				if c.Timeout != nil {
					next.Callback.Timeout = *c.Timeout
				}
			}
			if b.Retry != nil {
				next.Retry = b.Retry
			}
			if b.Misfire != nil {
				next.Misfire = *b.Misfire
			}
			sp, err := s.spec(next)
			if err != nil {
				return nil, fromService(err)
			}
			defChanged := b.At != nil || b.Cron != nil || b.Callback != nil || b.Retry != nil || b.Misfire != nil
			if defChanged {
				sp.Disabled = t.Disabled
				if err := s.timers.Update(ctx, t.ID, sp); err != nil {
					return nil, fromService(err)
				}
			}
			if b.Enabled != nil && *b.Enabled == t.Disabled {
				if err := s.setEnabled(ctx, t.ID, *b.Enabled); err != nil {
					return nil, err
				}
			}
			t, err = s.timers.Get(ctx, t.ID)
			if err != nil {
				return nil, fromService(err)
			}
			return &timerBody{timerOut(t)}, nil
		})

	for _, act := range []struct {
		path    string
		enabled bool
	}{{"enable", true}, {"disable", false}} {
		huma.Register(api, huma.Operation{OperationID: act.path + "-timer", Method: http.MethodPost, Path: "/api/v1/timers/{id}/" + act.path,
			Summary: map[bool]string{true: "Enable a timer (from now on)", false: "Disable a timer: no fire of it not yet begun is delivered"}[act.enabled],
			Tags:    []string{"timers"}, Security: bearer(), Errors: []int{401, 404}},
			func(ctx context.Context, in *idPath) (*timerBody, error) {
				if _, err := s.timerOf(ctx, in.ID); err != nil {
					return nil, err
				}
				if err := s.setEnabled(ctx, in.ID, act.enabled); err != nil {
					return nil, err
				}
				t, err := s.timers.Get(ctx, in.ID)
				if err != nil {
					return nil, fromService(err)
				}
				return &timerBody{timerOut(t)}, nil
			})
	}

	huma.Register(api, huma.Operation{OperationID: "delete-timer", Method: http.MethodDelete, Path: "/api/v1/timers/{id}", Summary: "Delete a timer with its fires and their history",
		Tags: []string{"timers"}, Security: bearer(), DefaultStatus: http.StatusNoContent, Errors: []int{401, 404}},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			if _, err := s.timerOf(ctx, in.ID); err != nil {
				return nil, err
			}
			return nil, fromService(s.timers.Delete(ctx, in.ID))
		})

	type firesIn struct {
		ID    string `path:"id" maxLength:"64"`
		Limit int    `query:"limit" minimum:"0" maximum:"1000" doc:"default 50"`
	}
	type firesOut struct {
		Body struct {
			Fires []timer.FireRecord `json:"fires"`
		}
	}
	huma.Register(api, huma.Operation{OperationID: "list-fires", Method: http.MethodGet, Path: "/api/v1/timers/{id}/fires", Summary: "A timer's fires, newest first, with every attempt",
		Tags: []string{"fires"}, Security: bearer(), Errors: []int{401, 404}},
		func(ctx context.Context, in *firesIn) (*firesOut, error) {
			if _, err := s.timerOf(ctx, in.ID); err != nil {
				return nil, err
			}
			if in.Limit == 0 {
				in.Limit = 50
			}
			fs, err := s.timers.Fires(ctx, in.ID, in.Limit)
			if err != nil {
				return nil, fromService(err)
			}
			out := &firesOut{}
			out.Body.Fires = fs
			if out.Body.Fires == nil {
				out.Body.Fires = []timer.FireRecord{}
			}
			return out, nil
		})

	type retryIn struct {
		ID      string `path:"id" maxLength:"64"`
		Planned string `path:"planned" doc:"the fire's planned time: RFC 3339 (milliseconds) or Unix milliseconds"`
	}
	huma.Register(api, huma.Operation{OperationID: "retry-fire", Method: http.MethodPost, Path: "/api/v1/timers/{id}/fires/{planned}/retry", Summary: "Re-queue a dead fire now, with its attempts counted anew",
		Tags: []string{"fires"}, Security: bearer(), DefaultStatus: http.StatusAccepted, Errors: []int{401, 404, 409, 422}},
		func(ctx context.Context, in *retryIn) (*struct{}, error) {
			if _, err := s.timerOf(ctx, in.ID); err != nil {
				return nil, err
			}
			planned, err := time.Parse(time.RFC3339Nano, in.Planned)
			if err != nil {
				ms, perr := strconv.ParseInt(in.Planned, 10, 64)
				if perr != nil {
					return nil, apiErr(http.StatusUnprocessableEntity, "planned", "planned %q: an RFC 3339 time or Unix milliseconds", in.Planned)
				}
				planned = time.UnixMilli(ms)
			}
			return nil, fromService(s.timers.RetryFire(ctx, in.ID, planned))
		})
}

func (s *Server) setEnabled(ctx context.Context, id string, enabled bool) error {
	if enabled {
		return fromService(s.timers.Enable(ctx, id))
	}
	return fromService(s.timers.Disable(ctx, id))
}

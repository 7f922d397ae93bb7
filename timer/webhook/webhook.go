// Package webhook delivers durable timers' fires as HTTP callbacks, signed
// the Standard Webhooks way (https://www.standardwebhooks.com), so that a
// receiver verifies them with any of that project's libraries.
//
// A timer of the kind this package handles carries a Callback as its
// payload. Each attempt is one request, with the fire's idempotency key in
// Idempotency-Key and webhook-id, the attempt in Fom-Attempt, the planned
// time in Fom-Planned, and webhook-timestamp/webhook-signature over
// "id.timestamp.body", one signature per secret in force (two during a
// rotation). 2xx is success; 408, 429 (honouring Retry-After), 5xx and
// network errors are retried by the timer service; other answers fail the
// fire at once.
//
// Outbound safety: the address actually dialled (after DNS, so rebinding
// cannot get around it) is checked in the dialer's Control hook with
// code.dny.dev/ssrf, which keeps IANA's special-purpose ranges; loopback,
// private, link-local and multicast addresses are refused unless allowed.
// Redirects are not followed. A bound holds the requests under way at once.
package webhook

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"code.dny.dev/ssrf"
	"github.com/jonboulle/clockwork"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/fom-go/fom/timer"
)

// Kind is the timer kind whose fires are HTTP callbacks.
const Kind = "http"

// Limits of a callback.
const (
	MaxURLLen     = 2048
	MaxHeaders    = 32
	MaxBodyLen    = 256 << 10
	MaxTimeout    = 10 * time.Minute
	KeptBodyBytes = 4 << 10 // of a response, in an attempt's history
)

// DefaultTimeout is an attempt's deadline unless the callback says otherwise.
const DefaultTimeout = 10 * time.Second

// Callback is what an http timer calls: its payload.
type Callback struct {
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"` // default POST
	Headers map[string]string `json:"headers,omitempty"`
	// Body is sent as it is: a JSON string's text, or any other JSON
	// value as JSON (Content-Type application/json unless Headers say).
	Body    json.RawMessage `json:"body,omitempty"`
	Timeout string          `json:"timeout,omitempty"` // a Go duration; default 10s
}

// FieldError is a bad callback: the field (as the REST API names it), the
// value and why.
type FieldError struct {
	Field, Value, Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("callback %s %q: %s", e.Field, e.Value, e.Reason)
}

// reserved is whether a header is one the sender sets on every attempt.
func reserved(k string) bool {
	switch strings.ToLower(k) {
	case "idempotency-key", "fom-attempt", "fom-planned", "webhook-id", "webhook-timestamp", "webhook-signature",
		"host", "content-length", "transfer-encoding", "connection":
		return true
	}
	return false
}

// Check validates c and returns it with its defaults (method POST,
// timeout 10s). g, when not nil, refuses a URL whose host is an address
// literal it would not dial (a host name is checked when dialled).
func Check(c Callback, g *Guard) (Callback, error) {
	bad := func(field, value, reason string) (Callback, error) {
		if len(value) > 120 {
			value = value[:120] + "…"
		}
		return c, &FieldError{Field: field, Value: value, Reason: reason}
	}
	if c.URL == "" {
		return bad("callback.url", "", "is required")
	}
	if len(c.URL) > MaxURLLen {
		return bad("callback.url", c.URL, fmt.Sprintf("is longer than %d bytes", MaxURLLen))
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return bad("callback.url", c.URL, "is not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("callback.url", c.URL, "must be an http or https URL")
	}
	if u.Host == "" || u.Hostname() == "" {
		return bad("callback.url", c.URL, "has no host")
	}
	if u.User != nil {
		return bad("callback.url", c.URL, "must not carry credentials (put them in callback.headers)")
	}
	if g != nil {
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
			if err := g.check(ip); err != nil {
				return bad("callback.url", c.URL, err.Error())
			}
		}
	}
	if c.Method == "" {
		c.Method = http.MethodPost
	}
	c.Method = strings.ToUpper(c.Method)
	switch c.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return bad("callback.method", c.Method, "must be GET, POST, PUT, PATCH or DELETE")
	}
	if len(c.Headers) > MaxHeaders {
		return bad("callback.headers", strconv.Itoa(len(c.Headers)), fmt.Sprintf("more than %d headers", MaxHeaders))
	}
	for k, v := range c.Headers {
		if !validHeaderName(k) {
			return bad("callback.headers", k, "is not a valid header name")
		}
		if reserved(k) {
			return bad("callback.headers", k, "is set by fomd on every attempt")
		}
		if strings.ContainsAny(v, "\r\n\x00") || !utf8.ValidString(v) {
			return bad("callback.headers."+k, v, "holds a line break, a NUL or invalid UTF-8")
		}
	}
	if len(c.Body) > MaxBodyLen {
		return bad("callback.body", strconv.Itoa(len(c.Body))+" bytes", fmt.Sprintf("is larger than %d bytes", MaxBodyLen))
	}
	if len(c.Body) > 0 && !json.Valid(c.Body) {
		return bad("callback.body", string(c.Body), "is not JSON")
	}
	if c.Timeout == "" {
		c.Timeout = DefaultTimeout.String()
	}
	d, err := time.ParseDuration(c.Timeout)
	if err != nil || d <= 0 || d > MaxTimeout {
		return bad("callback.timeout", c.Timeout, fmt.Sprintf("must be a duration above 0 and at most %s", MaxTimeout))
	}
	return c, nil
}

func validHeaderName(k string) bool {
	if k == "" || len(k) > 256 {
		return false
	}
	for _, r := range k {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// TimeoutOf is a checked callback's attempt deadline.
func TimeoutOf(c Callback) time.Duration {
	d, err := time.ParseDuration(c.Timeout)
	if err != nil || d <= 0 {
		return DefaultTimeout
	}
	return d
}

// bodyBytes is what a request carries for c.Body.
func bodyBytes(c Callback) (b []byte, contentType string) {
	if len(c.Body) == 0 || string(c.Body) == "null" {
		return nil, ""
	}
	var s string
	if c.Body[0] == '"' && json.Unmarshal(c.Body, &s) == nil {
		return []byte(s), "text/plain; charset=utf-8"
	}
	return c.Body, "application/json"
}

// Guard says which addresses a callback may dial.
type Guard struct {
	g     *ssrf.Guardian
	allow []netip.Prefix
	any   bool
}

// NewGuard refuses loopback, private, link-local, multicast and every
// other special-purpose address but those in allow; allowAll turns the
// guard off (a private network of trusted receivers).
func NewGuard(allowAll bool, allow ...netip.Prefix) *Guard {
	var v4, v6 []netip.Prefix
	for _, p := range allow {
		if p.Addr().Is4() {
			v4 = append(v4, p.Masked())
		} else {
			v6 = append(v6, p.Masked())
		}
	}
	return &Guard{
		g:     ssrf.New(ssrf.WithAnyPort(), ssrf.WithAllowedV4Prefixes(v4...), ssrf.WithAllowedV6Prefixes(v6...)),
		allow: allow,
		any:   allowAll,
	}
}

// ErrRefusedAddress is a callback to an address the guard refuses.
var ErrRefusedAddress = errors.New("address refused by the outbound guard (loopback, private, link-local and special-purpose addresses need --allow-private-callbacks or an allow-list)")

func (g *Guard) check(ip netip.Addr) error {
	if g == nil || g.any {
		return nil
	}
	if err := g.g.SafeAddr(ip.Unmap()); err != nil {
		return fmt.Errorf("%s: %w", ip, ErrRefusedAddress)
	}
	return nil
}

// control is the dialer's Control hook: it checks the address dialled.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%s: %w", address, ErrRefusedAddress)
	}
	return g.check(ap.Addr())
}

// Options configure a Sender.
type Options struct {
	// Secrets returns the signing secrets of a namespace in force now
	// ("whsec_" + base64), the newest first; a signature is sent for each.
	Secrets func(ctx context.Context, namespace string) ([]string, error)
	// Guard checks every address dialled. Default: NewGuard(false).
	Guard *Guard
	// MaxConcurrent bounds the requests under way at once. Default 512.
	MaxConcurrent int
	// UserAgent. Default "fomd".
	UserAgent string
	// Clock gives the webhook-timestamp. Default: real.
	Clock clockwork.Clock
}

// Sender delivers fires of http timers.
type Sender struct {
	o      Options
	client *http.Client
	sem    chan struct{}
}

// New builds a sender; Close releases its idle connections.
func New(o Options) *Sender {
	if o.Guard == nil {
		o.Guard = NewGuard(false)
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = 512
	}
	if o.UserAgent == "" {
		o.UserAgent = "fomd"
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	g := o.Guard
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !g.any {
		d.Control = g.control
	}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would dial the receiver for us, unchecked
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          o.MaxConcurrent,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 0, // the attempt's deadline bounds it
	}
	return &Sender{
		o: o,
		client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		sem: make(chan struct{}, o.MaxConcurrent),
	}
}

// Close closes idle connections.
func (s *Sender) Close() { s.client.CloseIdleConnections() }

// StatusError is a callback's non-2xx answer.
type StatusError struct {
	Code int
	Body string // the first KeptBodyBytes of the response
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("HTTP %d %s", e.Code, http.StatusText(e.Code))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// StatusCode implements timer.StatusError.
func (e *StatusError) StatusCode() int { return e.Code }

// Handle is the timer.Handler of http timers: one attempt of f.
func (s *Sender) Handle(ctx context.Context, f timer.Fire) error {
	var c Callback
	if err := json.Unmarshal(f.Payload, &c); err != nil {
		return timer.Permanent(fmt.Errorf("timer %s: the payload is not a callback: %w", f.TimerID, err))
	}
	c, err := Check(c, nil)
	if err != nil {
		return timer.Permanent(fmt.Errorf("timer %s: %w", f.TimerID, err))
	}
	body, ctype := bodyBytes(c)
	var secrets []string
	if s.o.Secrets != nil {
		if secrets, err = s.o.Secrets(ctx, f.Namespace); err != nil {
			return fmt.Errorf("timer %s: the namespace's secrets: %w", f.TimerID, err)
		}
	}
	now := s.o.Clock.Now()
	sig, err := SignAll(secrets, f.Key, now, body)
	if err != nil {
		return timer.Permanent(fmt.Errorf("timer %s: %w", f.TimerID, err))
	}
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, c.URL, rd)
	if err != nil {
		return timer.Permanent(fmt.Errorf("timer %s: %w", f.TimerID, err))
	}
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	if ctype != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("User-Agent", s.o.UserAgent)
	req.Header.Set("Idempotency-Key", f.Key)
	req.Header.Set("Fom-Attempt", strconv.Itoa(f.Attempt))
	req.Header.Set("Fom-Planned", f.Planned.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	req.Header.Set("webhook-id", f.Key)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	if sig != "" {
		req.Header.Set("webhook-signature", sig)
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return fmt.Errorf("waiting for an outbound connection: %w", ctx.Err())
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if errors.Is(err, ErrRefusedAddress) {
			return timer.Permanent(err)
		}
		return err
	}
	defer resp.Body.Close()
	kept, _ := io.ReadAll(io.LimitReader(resp.Body, KeptBodyBytes))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	timer.ReportStatus(ctx, resp.StatusCode)
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	se := &StatusError{Code: code, Body: strings.ToValidUTF8(string(kept), "�")}
	switch {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), s.o.Clock.Now()); ok {
			return timer.RetryAfter(se, d)
		}
		return se
	case code == http.StatusRequestTimeout || code >= 500:
		return se
	case code >= 300 && code < 400:
		se.Body = "redirect to " + resp.Header.Get("Location") + " not followed"
		return timer.Permanent(se)
	default:
		return timer.Permanent(se)
	}
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(min(n, 86400)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, min(t.Sub(now), 24*time.Hour)), true
	}
	return 0, false
}

// NewSecret makes a signing secret: "whsec_" and 32 random bytes in base64.
func NewSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// CheckSecret says whether s is a signing secret ("whsec_" + base64 of
// 24 to 64 bytes).
func CheckSecret(s string) error {
	raw, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return errors.New(`must start with "whsec_"`)
	}
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(b) < 24 || len(b) > 64 {
		return errors.New(`must be "whsec_" and the base64 of 24 to 64 random bytes`)
	}
	return nil
}

// Sign is the Standard Webhooks signature "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>" under secret, made by that project's library.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return "", fmt.Errorf("signing secret: %w", err)
	}
	return wh.Sign(id, ts, body)
}

// SignAll is the webhook-signature header for every secret, space
// separated (a receiver accepts any that verifies).
func SignAll(secrets []string, id string, ts time.Time, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, sec := range secrets {
		sig, err := Sign(sec, id, ts, body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.uber.org/goleak"

	"github.com/fom-go/fom/timer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The Standard Webhooks specification's published example: this secret,
// id, timestamp and body sign to this signature.
func TestSignMatchesTheSpecificationsTestVector(t *testing.T) {
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		want   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	got, err := Sign(secret, id, time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if err != nil || got != want {
		t.Fatalf("Sign = %q, %v; want %q", got, err, want)
	}
}

type received struct {
	header http.Header
	body   []byte
	method string
}

type receiver struct {
	mu   sync.Mutex
	got  []received
	srv  *httptest.Server
	next func(w http.ResponseWriter, n int) // answers the n-th request (0-based)
}

func newReceiver(t *testing.T, next func(w http.ResponseWriter, n int)) *receiver {
	r := &receiver{next: next}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := len(r.got)
		r.got = append(r.got, received{req.Header.Clone(), b, req.Method})
		r.mu.Unlock()
		if r.next != nil {
			r.next(w, n)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func loopback() *Guard { return NewGuard(false, netip.MustParsePrefix("127.0.0.0/8")) }

func fire(t *testing.T, c Callback, attempt int) timer.Fire {
	p, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	planned := time.UnixMilli(1_800_000_000_123)
	return timer.Fire{TimerID: "t1", Namespace: "billing", Name: "inv-1", Kind: Kind, Payload: p, Planned: planned, Attempt: attempt, Key: timer.KeyOf("t1", planned)}
}

func TestDeliveryIsSignedVerifiablyWithBothSecretsOfARotation(t *testing.T) {
	r := newReceiver(t, nil)
	oldSecret, newSecret := NewSecret(), NewSecret()
	s := New(Options{Guard: loopback(), Secrets: func(context.Context, string) ([]string, error) { return []string{newSecret, oldSecret}, nil }})
	defer s.Close()
	c := Callback{URL: r.srv.URL + "/hook?x=1", Headers: map[string]string{"X-Tenant": "acme"}, Body: json.RawMessage(`{"invoice":42}`)}
	if err := s.Handle(context.Background(), fire(t, c, 2)); err != nil {
		t.Fatal(err)
	}
	got := r.got[0]
	for _, sec := range []string{oldSecret, newSecret} {
		wh, err := standardwebhooks.NewWebhook(sec)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(got.body, got.header); err != nil {
			t.Fatalf("the Standard Webhooks library refuses the signature under %s: %v (headers %v)", sec[:10], err, got.header)
		}
	}
	other, _ := standardwebhooks.NewWebhook(NewSecret())
	if other.Verify(got.body, got.header) == nil {
		t.Fatal("a signature verified under a secret never used")
	}
	h := got.header
	if h.Get("Idempotency-Key") != "t1:1800000000123" || h.Get("webhook-id") != "t1:1800000000123" || h.Get("Fom-Attempt") != "2" ||
		h.Get("Fom-Planned") != "2027-01-15T08:00:00.123Z" || h.Get("X-Tenant") != "acme" || h.Get("Content-Type") != "application/json" || got.method != "POST" {
		t.Fatalf("headers %v, method %s", h, got.method)
	}
	if string(got.body) != `{"invoice":42}` {
		t.Fatalf("body %s", got.body)
	}
	// A JSON string body is sent as its text.
	c.Body, c.Method = json.RawMessage(`"plain text"`), "put"
	if err := s.Handle(context.Background(), fire(t, c, 1)); err != nil {
		t.Fatal(err)
	}
	if string(r.got[1].body) != "plain text" || r.got[1].method != "PUT" || !strings.HasPrefix(r.got[1].header.Get("Content-Type"), "text/plain") {
		t.Fatalf("%s %s %v", r.got[1].method, r.got[1].body, r.got[1].header)
	}
}

func TestAnswersClassified(t *testing.T) {
	cases := []struct {
		name       string
		answer     func(w http.ResponseWriter)
		ok, retry  bool
		retryAfter time.Duration
	}{
		{"204", func(w http.ResponseWriter) { w.WriteHeader(204) }, true, false, 0},
		{"500 retried", func(w http.ResponseWriter) { w.WriteHeader(500); io.WriteString(w, "boom") }, false, true, 0},
		{"408 retried", func(w http.ResponseWriter) { w.WriteHeader(408) }, false, true, 0},
		{"429 with Retry-After", func(w http.ResponseWriter) { w.Header().Set("Retry-After", "7"); w.WriteHeader(429) }, false, true, 7 * time.Second},
		{"400 fails at once", func(w http.ResponseWriter) { w.WriteHeader(400) }, false, false, 0},
		{"404 fails at once", func(w http.ResponseWriter) { w.WriteHeader(404) }, false, false, 0},
		{"redirect not followed", func(w http.ResponseWriter) { w.Header().Set("Location", "/elsewhere"); w.WriteHeader(302) }, false, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newReceiver(t, func(w http.ResponseWriter, _ int) { c.answer(w) })
			s := New(Options{Guard: loopback()})
			defer s.Close()
			err := s.Handle(context.Background(), fire(t, Callback{URL: r.srv.URL}, 1))
			if c.ok != (err == nil) {
				t.Fatalf("err = %v", err)
			}
			if err == nil {
				return
			}
			if len(r.got) != 1 {
				t.Fatalf("%d requests: a redirect was followed?", len(r.got))
			}
			if c.retry == timer.IsPermanent(err) {
				t.Fatalf("err %v: permanent %v, want retried %v", err, timer.IsPermanent(err), c.retry)
			}
			if got, _ := timer.RetryAfterOf(err); got != c.retryAfter {
				t.Fatalf("retry after %s, want %s", got, c.retryAfter)
			}
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("%v is no StatusError", err)
			}
		})
	}
}

func TestRetryAfterAsADate(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	if d, ok := retryAfter(now.Add(90*time.Second).Format(http.TimeFormat), now); !ok || d != 90*time.Second {
		t.Fatalf("%s %v", d, ok)
	}
	if _, ok := retryAfter("soon", now); ok {
		t.Fatal("garbage read as a Retry-After")
	}
}

func TestResponseBodyKeptBounded(t *testing.T) {
	r := newReceiver(t, func(w http.ResponseWriter, _ int) {
		w.WriteHeader(503)
		io.WriteString(w, strings.Repeat("x", 100_000))
	})
	s := New(Options{Guard: loopback()})
	defer s.Close()
	err := s.Handle(context.Background(), fire(t, Callback{URL: r.srv.URL}, 1))
	var se *StatusError
	if !errors.As(err, &se) || len(se.Body) != KeptBodyBytes {
		t.Fatalf("%v", err)
	}
}

// The guard checks the address dialled: an address literal and a name
// that resolves to loopback are both refused, and never reach the
// receiver; a failed dial is permanent (a retry would be refused again).
func TestGuardRefusesPrivateAddressesAsDialled(t *testing.T) {
	r := newReceiver(t, nil)
	s := New(Options{}) // the default guard
	defer s.Close()
	port := r.srv.URL[strings.LastIndexByte(r.srv.URL, ':'):]
	for _, u := range []string{r.srv.URL, "http://localhost" + port, "http://[::1]" + port} {
		err := s.Handle(context.Background(), fire(t, Callback{URL: u}, 1))
		if !errors.Is(err, ErrRefusedAddress) || !timer.IsPermanent(err) {
			t.Fatalf("%s: %v", u, err)
		}
	}
	if len(r.got) != 0 {
		t.Fatalf("the receiver got %d requests", len(r.got))
	}
	if _, err := Check(Callback{URL: "http://10.1.2.3/x"}, NewGuard(false)); err == nil || !strings.Contains(err.Error(), "callback.url") {
		t.Fatalf("an address literal in a private range was accepted: %v", err)
	}
	if _, err := Check(Callback{URL: "http://10.1.2.3/x"}, NewGuard(false, netip.MustParsePrefix("10.0.0.0/8"))); err != nil {
		t.Fatalf("an allowed range was refused: %v", err)
	}
	open := New(Options{Guard: NewGuard(true)})
	defer open.Close()
	if err := open.Handle(context.Background(), fire(t, Callback{URL: r.srv.URL}, 1)); err != nil {
		t.Fatal(err)
	}
}

func TestCheckNamesTheField(t *testing.T) {
	cases := []struct {
		c     Callback
		field string
	}{
		{Callback{}, "callback.url"},
		{Callback{URL: "ftp://x/y"}, "callback.url"},
		{Callback{URL: "http://u:p@x/"}, "callback.url"},
		{Callback{URL: "http://x/", Method: "TRACE"}, "callback.method"},
		{Callback{URL: "http://x/", Headers: map[string]string{"Webhook-Signature": "v1,x"}}, "callback.headers"},
		{Callback{URL: "http://x/", Headers: map[string]string{"X-A": "a\r\nb"}}, "callback.headers.X-A"},
		{Callback{URL: "http://x/", Headers: map[string]string{"bad name": "a"}}, "callback.headers"},
		{Callback{URL: "http://x/", Body: json.RawMessage(`{nope`)}, "callback.body"},
		{Callback{URL: "http://x/", Timeout: "0s"}, "callback.timeout"},
		{Callback{URL: "http://x/", Timeout: "1h"}, "callback.timeout"},
	}
	for _, c := range cases {
		_, err := Check(c.c, nil)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: %v, want a FieldError on %s", c.c, err, c.field)
		}
	}
	got, err := Check(Callback{URL: "https://example.com/x"}, nil)
	if err != nil || got.Method != "POST" || TimeoutOf(got) != DefaultTimeout {
		t.Fatalf("%+v %v", got, err)
	}
	if CheckSecret(NewSecret()) != nil || CheckSecret("whsec_c2hvcnQ=") == nil || CheckSecret("abc") == nil {
		t.Fatal("CheckSecret")
	}
}

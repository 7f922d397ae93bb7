package fomd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}

// call is one callback as a receiver got it.
type call struct {
	at     time.Time
	header http.Header
	body   []byte
	path   string
}

// receiver is a real HTTP server on loopback that records callbacks and
// answers them as answer says (200 by default).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	calls  []call
	answer func(w http.ResponseWriter, n int) bool // true: answered
	got    chan struct{}
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: make(chan struct{}, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := len(r.calls)
		r.calls = append(r.calls, call{time.Now(), req.Header.Clone(), b, req.URL.Path})
		answer := r.answer
		r.mu.Unlock()
		if answer == nil || !answer(w, n) {
			w.WriteHeader(200)
		}
		r.got <- struct{}{}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) setAnswer(f func(w http.ResponseWriter, n int) bool) {
	r.mu.Lock()
	r.answer = f
	r.mu.Unlock()
}

func (r *receiver) snapshot() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// wait waits for the receiver to have n calls.
func (r *receiver) wait(t *testing.T, n int, within time.Duration) []call {
	t.Helper()
	deadline := time.After(within)
	for {
		if c := r.snapshot(); len(c) >= n {
			return c
		}
		select {
		case <-r.got:
		case <-deadline:
			t.Fatalf("the receiver got %d callbacks in %s, want %d", len(r.snapshot()), within, n)
		}
	}
}

func testConfig(t *testing.T) Config {
	c := DefaultConfig()
	c.Addr = "127.0.0.1:0"
	c.DataDir = t.TempDir()
	c.Allow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	c.Refresh = 200 * time.Millisecond
	return c
}

func start(t *testing.T, c Config) *Server {
	t.Helper()
	s, err := New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

// client calls the API with a token.
type client struct {
	t     *testing.T
	base  string
	token string
}

func (c client) do(method, path string, body any, want int) map[string]any {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, raw, want)
	}
	out := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			c.t.Fatalf("%s %s: %s is not a JSON object: %v", method, path, raw, err)
		}
	}
	return out
}

func admin(t *testing.T, s *Server) client { return client{t, s.URL(), s.AdminToken()} }

// namespaceClient makes a namespace and returns its client and secret.
func namespaceClient(t *testing.T, s *Server, name string, extra map[string]any) (client, string) {
	body := map[string]any{"name": name}
	for k, v := range extra {
		body[k] = v
	}
	ns := admin(t, s).do("POST", "/api/v1/namespaces", body, 201)
	return client{t, s.URL(), ns["token"].(string)}, ns["secret"].(string)
}

func ms(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func verify(t *testing.T, secret string, c call) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(c.body, c.header); err != nil {
		t.Fatalf("signature refused by the Standard Webhooks library: %v (headers %v)", err, c.header)
	}
}

func TestOneShotAndCronTimersDeliveredOnTimeSigned(t *testing.T) {
	s := start(t, testConfig(t))
	rcv := newReceiver(t)
	c, secret := namespaceClient(t, s, "billing", nil)
	due := time.Now().Add(700 * time.Millisecond).Truncate(time.Millisecond)
	one := c.do("POST", "/api/v1/timers", map[string]any{"name": "inv-42", "at": ms(due),
		"callback": map[string]any{"url": rcv.srv.URL + "/once", "body": map[string]any{"invoice": 42}, "headers": map[string]string{"X-Tenant": "acme"}}}, 201)
	if one["namespace"] != "billing" || one["state"] != "enabled" || one["id"] == "" || one["callback"].(map[string]any)["method"] != "POST" {
		t.Fatalf("created: %v", one)
	}
	cron := c.do("POST", "/api/v1/timers", map[string]any{"name": "tick", "cron": "* * * * * *",
		"callback": map[string]any{"url": rcv.srv.URL + "/cron", "body": "tick"}}, 201)
	calls := rcv.wait(t, 4, 10*time.Second)
	byPath := map[string][]call{}
	for _, cl := range calls {
		byPath[cl.path] = append(byPath[cl.path], cl)
		verify(t, secret, cl)
		if cl.header.Get("Idempotency-Key") != cl.header.Get("webhook-id") || cl.header.Get("Fom-Attempt") != "1" {
			t.Fatalf("headers %v", cl.header)
		}
		planned, err := time.Parse(time.RFC3339Nano, cl.header.Get("Fom-Planned"))
		if err != nil {
			t.Fatal(err)
		}
		if cl.at.Before(planned) {
			t.Fatalf("delivered at %s, before its planned %s", cl.at, planned)
		}
	}
	o := byPath["/once"]
	if len(o) != 1 || string(o[0].body) != `{"invoice":42}` || o[0].header.Get("X-Tenant") != "acme" ||
		o[0].header.Get("Idempotency-Key") != one["id"].(string)+":"+strconv.FormatInt(due.UnixMilli(), 10) {
		t.Fatalf("one-shot: %d calls %+v", len(o), o)
	}
	if len(byPath["/cron"]) < 2 || string(byPath["/cron"][0].body) != "tick" {
		t.Fatalf("cron: %+v", byPath["/cron"])
	}
	// The one-shot is done; its fire's history has the attempt with its status.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := c.do("GET", "/api/v1/timers/"+one["id"].(string), nil, 200)
		fires := c.do("GET", "/api/v1/timers/"+one["id"].(string)+"/fires", nil, 200)["fires"].([]any)
		if got["state"] == "done" && len(fires) == 1 && fires[0].(map[string]any)["state"] == "succeeded" {
			at := fires[0].(map[string]any)["attempts"].([]any)
			if len(at) != 1 || at[0].(map[string]any)["status_code"] != float64(200) {
				t.Fatalf("attempts %v", at)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timer %v, fires %v", got, fires)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.do("POST", "/api/v1/timers/"+cron["id"].(string)+"/disable", nil, 200)
}

func TestRetriesOn500And429WithRetryAfterThenDeadAndRetriedThroughTheAPI(t *testing.T) {
	s := start(t, testConfig(t))
	rcv := newReceiver(t)
	rcv.setAnswer(func(w http.ResponseWriter, n int) bool {
		switch n {
		case 0:
			w.WriteHeader(500)
		case 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
		default:
			return false
		}
		return true
	})
	c, secret := namespaceClient(t, s, "shop", nil)
	tm := c.do("POST", "/api/v1/timers", map[string]any{"name": "order-1", "at": ms(time.Now()),
		"callback": map[string]any{"url": rcv.srv.URL}, "retry": map[string]any{"max_attempts": 3, "min_backoff": "10ms", "max_backoff": "50ms"}}, 201)
	calls := rcv.wait(t, 3, 10*time.Second)
	for i, cl := range calls {
		verify(t, secret, cl)
		if cl.header.Get("Idempotency-Key") != calls[0].header.Get("Idempotency-Key") || cl.header.Get("Fom-Attempt") != strconv.Itoa(i+1) {
			t.Fatalf("attempt %d: %v", i+1, cl.header)
		}
	}
	if gap := calls[2].at.Sub(calls[1].at); gap < time.Second {
		t.Fatalf("the attempt after a 429 with Retry-After: 1 came %s later", gap)
	}
	// Always failing now: with two attempts the fire is dead.
	rcv.setAnswer(func(w http.ResponseWriter, n int) bool { w.WriteHeader(503); return true })
	dead := c.do("POST", "/api/v1/timers", map[string]any{"name": "order-2", "at": ms(time.Now()),
		"callback": map[string]any{"url": rcv.srv.URL + "/dead"}, "retry": map[string]any{"max_attempts": 2, "min_backoff": "10ms", "max_backoff": "10ms"}}, 201)
	id := dead["id"].(string)
	var planned string
	waitFor(t, func() bool {
		list := c.do("GET", "/api/v1/timers?state=dead", nil, 200)["timers"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["id"] != id {
			return false
		}
		f := c.do("GET", "/api/v1/timers/"+id+"/fires", nil, 200)["fires"].([]any)[0].(map[string]any)
		planned = f["planned"].(string)
		return f["state"] == "dead" && len(f["attempts"].([]any)) == 2
	})
	c.do("POST", "/api/v1/timers/"+tm["id"].(string)+"/fires/"+planned+"/retry", nil, 409) // not dead: succeeded
	rcv.setAnswer(nil)
	n := len(rcv.snapshot())
	c.do("POST", "/api/v1/timers/"+id+"/fires/"+planned+"/retry", nil, 202)
	got := rcv.wait(t, n+1, 10*time.Second)
	if got[n].path != "/dead" {
		t.Fatalf("retried fire went to %s", got[n].path)
	}
	waitFor(t, func() bool {
		f := c.do("GET", "/api/v1/timers/"+id+"/fires", nil, 200)["fires"].([]any)[0].(map[string]any)
		return f["state"] == "succeeded"
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestDisableBeforeTheFireAndUpdateToANewURL(t *testing.T) {
	s := start(t, testConfig(t))
	a, b := newReceiver(t), newReceiver(t)
	c, _ := namespaceClient(t, s, "ops", nil)
	due := time.Now().Add(1500 * time.Millisecond)
	off := c.do("POST", "/api/v1/timers", map[string]any{"name": "off", "at": ms(due), "callback": map[string]any{"url": a.srv.URL + "/off"}}, 201)
	moved := c.do("POST", "/api/v1/timers", map[string]any{"name": "moved", "at": ms(due), "callback": map[string]any{"url": a.srv.URL + "/old", "body": "old"}}, 201)
	if got := c.do("POST", "/api/v1/timers/"+off["id"].(string)+"/disable", nil, 200); got["state"] != "disabled" || got["enabled"] != false {
		t.Fatalf("disabled: %v", got)
	}
	up := c.do("PATCH", "/api/v1/timers/"+moved["id"].(string), map[string]any{"callback": map[string]any{"url": b.srv.URL + "/new", "body": map[string]any{"v": 2}}}, 200)
	if up["version"].(float64) <= moved["version"].(float64) || up["callback"].(map[string]any)["url"] != b.srv.URL+"/new" {
		t.Fatalf("updated: %v", up)
	}
	got := b.wait(t, 1, 10*time.Second)
	if string(got[0].body) != `{"v":2}` {
		t.Fatalf("the update's body was not used: %s", got[0].body)
	}
	time.Sleep(time.Until(due) + 500*time.Millisecond)
	if calls := a.snapshot(); len(calls) != 0 {
		t.Fatalf("the old URL or the disabled timer was called: %+v", calls)
	}
	if f := c.do("GET", "/api/v1/timers/"+off["id"].(string)+"/fires", nil, 200)["fires"].([]any); len(f) != 0 {
		t.Fatalf("the disabled timer has fires %v", f)
	}
}

func TestNamespacesSeeOnlyTheirOwn(t *testing.T) {
	s := start(t, testConfig(t))
	a, _ := namespaceClient(t, s, "team-a", nil)
	b, _ := namespaceClient(t, s, "team-b", map[string]any{"max_timers": 1, "rate": 5, "burst": 2, "concurrency": 3})
	ta := a.do("POST", "/api/v1/timers", map[string]any{"name": "x", "at": ms(time.Now().Add(time.Hour)), "callback": map[string]any{"url": "https://example.com/x"}}, 201)
	id := ta["id"].(string)
	b.do("GET", "/api/v1/timers/"+id, nil, 404)
	b.do("PATCH", "/api/v1/timers/"+id, map[string]any{"enabled": false}, 404)
	b.do("DELETE", "/api/v1/timers/"+id, nil, 404)
	b.do("GET", "/api/v1/timers/"+id+"/fires", nil, 404)
	b.do("GET", "/api/v1/namespaces/team-a", nil, 404)
	b.do("GET", "/api/v1/timers?namespace=team-a", nil, 403)
	b.do("POST", "/api/v1/timers", map[string]any{"namespace": "team-a", "name": "y", "at": ms(time.Now().Add(time.Hour)), "callback": map[string]any{"url": "https://example.com/x"}}, 403)
	b.do("POST", "/api/v1/namespaces", map[string]any{"name": "mine"}, 403)
	if l := b.do("GET", "/api/v1/timers", nil, 200)["timers"].([]any); len(l) != 0 {
		t.Fatalf("team-b lists %v", l)
	}
	// The quota: one timer in team-b.
	b.do("POST", "/api/v1/timers", map[string]any{"name": "1", "at": ms(time.Now().Add(time.Hour)), "callback": map[string]any{"url": "https://example.com/x"}}, 201)
	e := b.do("POST", "/api/v1/timers", map[string]any{"name": "2", "at": ms(time.Now().Add(time.Hour)), "callback": map[string]any{"url": "https://example.com/x"}}, 429)
	if e["error"].(map[string]any)["code"] != "quota_exceeded" {
		t.Fatalf("%v", e)
	}
	if l := s.Timers().Limits("team-b"); l.Rate != 5 || l.Burst != 2 || l.Concurrency != 3 || l.MaxTimers != 1 {
		t.Fatalf("limits in force: %+v", l)
	}
	ad := admin(t, s)
	if l := ad.do("GET", "/api/v1/timers", nil, 200)["timers"].([]any); len(l) != 2 {
		t.Fatalf("admin lists %d timers", len(l))
	}
	if g := ad.do("GET", "/api/v1/timers/"+id, nil, 200); g["namespace"] != "team-a" {
		t.Fatalf("%v", g)
	}
	ad.do("DELETE", "/api/v1/namespaces/team-a", nil, 409)
	// A token rotated: the old one no longer works; the new one does.
	rot := ad.do("PATCH", "/api/v1/namespaces/team-a", map[string]any{"rotate_token": true, "rotate_secret": true, "rotate_grace": "1h", "rate": 7}, 200)
	if rot["token"] == "" || len(rot["secrets"].([]any)) != 2 || rot["rate"] != float64(7) {
		t.Fatalf("rotated: %v", rot)
	}
	a.do("GET", "/api/v1/timers", nil, 401)
	a.token = rot["token"].(string)
	a.do("GET", "/api/v1/timers/"+id, nil, 200)
	a.do("DELETE", "/api/v1/timers/"+id, nil, 204)
	ad.do("DELETE", "/api/v1/namespaces/team-a", nil, 204)
	a.do("GET", "/api/v1/timers", nil, 401)
	client{t, s.URL(), ""}.do("GET", "/api/v1/timers", nil, 401)
	client{t, s.URL(), "nope-nope-nope-nope"}.do("GET", "/api/v1/timers", nil, 401)
}

// A callback to loopback is refused without an allow-list: an address
// literal at create (naming the field), a name that resolves to it when
// dialled (the fire is dead at once, the receiver never called).
func TestPrivateAddressesRefusedUnlessAllowed(t *testing.T) {
	cfg := testConfig(t)
	cfg.Allow = nil
	s := start(t, cfg)
	rcv := newReceiver(t)
	c, _ := namespaceClient(t, s, "ns", nil)
	e := c.do("POST", "/api/v1/timers", map[string]any{"name": "lit", "at": ms(time.Now()), "callback": map[string]any{"url": rcv.srv.URL}}, 422)
	if f := e["error"].(map[string]any); f["field"] != "callback.url" || !strings.Contains(f["message"].(string), "127.0.0.1") {
		t.Fatalf("%v", e)
	}
	port := rcv.srv.URL[strings.LastIndexByte(rcv.srv.URL, ':'):]
	tm := c.do("POST", "/api/v1/timers", map[string]any{"name": "name", "at": ms(time.Now()), "callback": map[string]any{"url": "http://localhost" + port}}, 201)
	waitFor(t, func() bool {
		f := c.do("GET", "/api/v1/timers/"+tm["id"].(string)+"/fires", nil, 200)["fires"].([]any)
		if len(f) == 0 || f[0].(map[string]any)["state"] != "dead" {
			return false
		}
		at := f[0].(map[string]any)["attempts"].([]any)
		if len(at) != 1 || !strings.Contains(at[0].(map[string]any)["error"].(string), "outbound guard") {
			t.Fatalf("attempts %v", at)
		}
		return true
	})
	if n := len(rcv.snapshot()); n != 0 {
		t.Fatalf("the receiver got %d calls", n)
	}
}

func TestRefusalsAreJSONNamingTheField(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxBody = 4096
	s := start(t, cfg)
	c, _ := namespaceClient(t, s, "ns", nil)
	soon := ms(time.Now().Add(time.Hour))
	cb := map[string]any{"url": "https://example.com/x"}
	cases := []struct {
		body  any
		want  int
		field string
	}{
		{map[string]any{"at": soon, "callback": cb}, 422, "name"},
		{map[string]any{"name": "a", "callback": cb}, 422, "at"},
		{map[string]any{"name": "a", "at": soon, "cron": "* * * * *", "callback": cb}, 422, "cron"},
		{map[string]any{"name": "a", "cron": "61 * * * *", "callback": cb}, 422, "cron"},
		{map[string]any{"name": "a", "at": "tomorrow", "callback": cb}, 422, "at"},
		{map[string]any{"name": "a", "at": soon, "callback": map[string]any{"url": "ftp://x"}}, 422, "callback.url"},
		{map[string]any{"name": "a", "at": soon, "callback": map[string]any{"url": "https://x", "timeout": "2h"}}, 422, "callback.timeout"},
		{map[string]any{"name": "a", "at": soon, "callback": cb, "retry": map[string]any{"min_backoff": "soon"}}, 422, "retry.min_backoff"},
		{map[string]any{"name": "a", "at": soon, "callback": cb, "retry": map[string]any{"max_attempts": 5000}}, 422, "retry.max_attempts"},
		{map[string]any{"name": "a", "at": soon, "callback": cb, "misfire": "twice"}, 422, "misfire"},
		{map[string]any{"name": "a", "at": soon, "callback": cb, "colour": "red"}, 422, "colour"},
		{`{"name": "a",`, 400, ""},
		{map[string]any{"name": "a", "at": soon, "callback": map[string]any{"url": "https://x", "body": strings.Repeat("x", 5000)}}, 413, "body"},
	}
	for _, cs := range cases {
		e := c.do("POST", "/api/v1/timers", cs.body, cs.want)["error"].(map[string]any)
		if e["code"] == "" || e["message"] == "" || (cs.field != "" && e["field"] != cs.field) {
			t.Errorf("%v: error %v, want field %q", cs.body, e, cs.field)
		}
	}
	c.do("POST", "/api/v1/timers", map[string]any{"name": "a", "at": soon, "callback": cb}, 201)
	if e := c.do("POST", "/api/v1/timers", map[string]any{"name": "a", "at": soon, "callback": cb}, 409)["error"].(map[string]any); e["field"] != "name" {
		t.Errorf("duplicate: %v", e)
	}
	// A batch is all or none; the error names the element.
	batch := map[string]any{"timers": []any{map[string]any{"name": "b1", "at": soon, "callback": cb}, map[string]any{"name": "b2", "at": soon, "callback": map[string]any{"url": "gopher://x"}}}}
	if e := c.do("POST", "/api/v1/timers/batch", batch, 422)["error"].(map[string]any); e["field"] != "timers[1].callback.url" {
		t.Errorf("batch: %v", e)
	}
	batch["timers"].([]any)[1].(map[string]any)["callback"] = cb
	if ids := c.do("POST", "/api/v1/timers/batch", batch, 201)["ids"].([]any); len(ids) != 2 {
		t.Errorf("batch ids %v", ids)
	}
	if l := c.do("GET", "/api/v1/timers", nil, 200)["timers"].([]any); len(l) != 3 {
		t.Errorf("after the batch: %d timers", len(l))
	}
	c.do("GET", "/api/v1/timers?state=sleeping", nil, 422)
	c.do("GET", "/api/v1/timers/nope", nil, 404)
	c.do("GET", "/api/v1/nothing", nil, 404)
	ad := admin(t, s)
	if e := ad.do("POST", "/api/v1/timers", map[string]any{"name": "b", "at": soon, "callback": cb}, 422)["error"].(map[string]any); e["field"] != "namespace" {
		t.Errorf("admin without namespace: %v", e)
	}
	ad.do("POST", "/api/v1/timers", map[string]any{"namespace": "ghost", "name": "b", "at": soon, "callback": cb}, 422)
	ad.do("POST", "/api/v1/namespaces", map[string]any{"name": "Bad Name"}, 422)
	ad.do("POST", "/api/v1/namespaces", map[string]any{"name": "ns"}, 409)
	ad.do("POST", "/api/v1/namespaces", map[string]any{"name": "x", "secret": "abc"}, 422)
}

// Every route under /api/v1 is in the OpenAPI document, and every
// operation there is routed.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	s := start(t, testConfig(t))
	doc := client{t, s.URL(), ""}.do("GET", "/api/v1/openapi.json", nil, 200)
	paths := doc["paths"].(map[string]any)
	documented := map[string]bool{}
	for p, ops := range paths {
		for m := range ops.(map[string]any) {
			documented[strings.ToUpper(m)+" "+p] = true
		}
	}
	routed := map[string]bool{}
	err := chi.Walk(s.srv.Handler.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if strings.HasPrefix(route, "/api/v1/") && !strings.HasPrefix(route, "/api/v1/openapi") && !strings.HasPrefix(route, "/api/v1/schemas") {
			routed[method+" "+route] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for r := range routed {
		if !documented[r] {
			t.Errorf("route %s is not in the OpenAPI document", r)
		}
	}
	for d := range documented {
		if !routed[d] {
			t.Errorf("operation %s is documented but not routed", d)
		}
	}
	for _, want := range []string{"POST /api/v1/timers", "POST /api/v1/timers/batch", "GET /api/v1/timers/{id}", "GET /api/v1/timers", "PATCH /api/v1/timers/{id}",
		"POST /api/v1/timers/{id}/enable", "POST /api/v1/timers/{id}/disable", "DELETE /api/v1/timers/{id}", "GET /api/v1/timers/{id}/fires",
		"POST /api/v1/timers/{id}/fires/{planned}/retry", "POST /api/v1/namespaces", "GET /api/v1/namespaces/{name}", "PATCH /api/v1/namespaces/{name}",
		"DELETE /api/v1/namespaces/{name}"} {
		if !documented[want] {
			t.Errorf("%s is missing", want)
		}
	}
	if len(documented) < 13 {
		t.Fatalf("%d operations documented", len(documented))
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/fom/"} {
		resp, err := http.Get(s.URL() + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
}

// Off loopback the admin page and the metrics need the admin token (as a
// bearer token, or basic auth "admin" with it).
func TestAdminPageNeedsTheTokenOffLoopback(t *testing.T) {
	cfg := testConfig(t)
	cfg.Addr = "0.0.0.0:0"
	s := start(t, cfg)
	_, port, _ := strings.Cut(s.Addr(), "]:")
	if port == "" {
		_, port, _ = strings.Cut(s.Addr(), ":")
	}
	base := "http://127.0.0.1:" + port
	get := func(path string, set func(*http.Request)) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		if set != nil {
			set(req)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []string{"/fom/", "/metrics"} {
		if c := get(p, nil); c != 401 {
			t.Errorf("%s without a token: %d", p, c)
		}
		if c := get(p, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+s.AdminToken()) }); c != 200 {
			t.Errorf("%s with the token: %d", p, c)
		}
		if c := get(p, func(r *http.Request) { r.SetBasicAuth("admin", s.AdminToken()) }); c != 200 {
			t.Errorf("%s with basic auth: %d", p, c)
		}
	}
	if c := get("/healthz", nil); c != 200 {
		t.Errorf("healthz: %d", c)
	}
}

package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fom-go/fom/fom"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir) // never returns: the parent kills it
	}
	goleak.VerifyTestMain(m)
}

type alpha struct {
	fom.Schedule `name:"alpha" fixedRate:"1h" remark:"<script>alert('remark')</script>"`
	Size         fom.Value[int] `fom:"size" default:"10"`
}

func (*alpha) Run(context.Context) (any, error) { return "ok", nil }

type beta struct {
	fom.Schedule `name:"beta"`
}

func (*beta) Run(context.Context) (any, error) { return nil, nil }

type fixture struct {
	t   *testing.T
	app *fom.App
	h   http.Handler
	dir string
}

func newFixture(t *testing.T, o Options) *fixture {
	t.Helper()
	dir := t.TempDir()
	app, err := fom.New(fom.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []any{&alpha{}, &beta{}} {
		if _, err := app.Register(j); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := app.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	h, err := NewHandler(app, o)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, app: app, h: h, dir: dir}
}

// testHost is the Host header of test requests (httptest: no socket).
const testHost = "127.0.0.1"

// csrf loads a page and returns its CSRF cookie and the token its forms carry.
func (f *fixture) csrf() (cookie, token string) {
	f.t.Helper()
	r := f.do("GET", "/fom/", "")
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == csrfCookie {
			cookie = c.Value
		}
	}
	_, rest, ok := strings.Cut(r.body, `name="csrf_token" value="`)
	token, _, _ = strings.Cut(rest, `"`)
	if cookie == "" || !ok || token == "" {
		f.t.Fatalf("page without a CSRF cookie or token: %v", r.header)
	}
	return "fom_csrf=" + cookie, token
}

type resp struct {
	status int
	header http.Header
	body   string
	env    envelope
}

func (f *fixture) do(method, path, body string, hdr ...string) resp {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Host = testHost // a loopback name, as the default AllowedHosts want
	if body != "" && strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	r := resp{status: w.Code, header: w.Header(), body: w.Body.String()}
	// Every API answer is an envelope; a downloaded file is not.
	if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") && w.Header().Get("Content-Disposition") == "" {
		if err := json.Unmarshal(w.Body.Bytes(), &r.env); err != nil {
			f.t.Fatalf("%s %s: body is not an envelope: %v: %s", method, path, err, r.body)
		}
	}
	return r
}

func (r resp) expect(t *testing.T, status int, msg string) resp {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if msg != "" && r.env.Msg != msg {
		t.Fatalf("msg %q, want %q", r.env.Msg, msg)
	}
	wantCode := 0
	if status >= 400 {
		wantCode = status
	}
	if r.env.Code != wantCode {
		t.Fatalf("code %d, want %d", r.env.Code, wantCode)
	}
	return r
}

func (r resp) data(t *testing.T, v any) {
	t.Helper()
	b, _ := json.Marshal(r.env.Data)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// sleeping waits until an exec-now's round is over and the schedule sleeps
// again, so that the next exec-now is not refused as "already running".
func (f *fixture) sleeping(name string) {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.app.Schedule(name).State() != fom.Sleeping {
		if time.Now().After(deadline) {
			f.t.Fatalf("schedule %s did not go back to sleep: %s", name, f.app.Schedule(name).State())
		}
		time.Sleep(time.Millisecond)
	}
}

package pgcluster_test

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fom-go/fom/cluster/pgcluster"
	"github.com/fom-go/fom/internal/pgtest"
)

// TestResyncOnlyWhenANotificationMayBeLost: the full re-read of what
// others changed runs at the first tick after the listening connection is
// established, not at every tick while it is heard, and again at the first
// tick after that connection is lost and re-established.
func TestResyncOnlyWhenANotificationMayBeLost(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	var resyncs atomic.Int64
	c := coordinator(t, schema, "e1", nil, pgcluster.Options{
		Channel: "fom_resync_" + schema, Notified: func(string) {},
		RenewEvery: 100 * time.Millisecond, LeaseTTL: time.Second,
		Resync: func(context.Context) { resyncs.Add(1) },
	}, "s")
	start(t, c)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 10s (%d resyncs)", what, resyncs.Load())
			}
		}
	}
	waitFor("listening and a resync", func() bool { return c.Listening() && resyncs.Load() >= 1 })
	// Past the ticks that may follow the first (the connection listened
	// after it, or the live instances were first read by it).
	time.Sleep(500 * time.Millisecond)
	base := resyncs.Load()
	time.Sleep(time.Second) // ten ticks
	if n := resyncs.Load() - base; n != 0 {
		t.Fatalf("%d resyncs in ten ticks while notifications were heard", n)
	}
	// The listening connection is cut: what changed meanwhile may be lost.
	if _, err := pool.Exec(context.Background(), "SELECT pg_terminate_backend($1)", int64(c.ListenPID())); err != nil {
		t.Fatal(err)
	}
	waitFor("a resync after the listening connection was cut", func() bool { return resyncs.Load() > base })
	waitFor("listening again", c.Listening)
}

// TestAJoiningInstanceGetsItsShareAtOnce: an instance that starts is given
// its share of the leases once it is ready and listens, not at the others'
// next renewal (ten seconds away here).
func TestAJoiningInstanceGetsItsShareAtOnce(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	var names []string
	for i := range 20 {
		names = append(names, "s"+strconv.Itoa(i))
	}
	o := pgcluster.Options{Channel: "fom_join_" + schema, Notified: func(string) {}, LeaseTTL: 30 * time.Second}
	a := coordinator(t, schema, "a", nil, o, names...)
	start(t, a)
	a.Ready()
	if a.Owned() != 20 {
		t.Fatalf("a holds %d leases, want 20", a.Owned())
	}
	waitListening(t, a)
	b := coordinator(t, schema, "b", nil, o, names...)
	start(t, b)
	// Started, not ready (its schedules not yet running): nothing moves.
	waitListening(t, b)
	time.Sleep(300 * time.Millisecond)
	if a.Owned() != 20 || b.Owned() != 0 {
		t.Fatalf("before b is ready: a holds %d leases, b %d; want 20 and 0", a.Owned(), b.Owned())
	}
	began := time.Now()
	b.Ready()
	for a.Owned() != 10 || b.Owned() != 10 {
		if time.Since(began) > 3*time.Second {
			t.Fatalf("after %s: a holds %d leases, b %d; want 10 each, well before a's next renewal (%s)", time.Since(began).Round(time.Millisecond), a.Owned(), b.Owned(), a.RenewEvery())
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("b held its share %s after it was ready", time.Since(began).Round(time.Millisecond))
}

// TestDeclarationsAreWrittenAsJSONWhateverTheirText: a declaration's keys
// and values reach the database as the JSON object of the same map,
// whatever characters they hold.
func TestDeclarationsAreWrittenAsJSONWhateverTheirText(t *testing.T) {
	for _, m := range []map[string]string{
		{},
		{"cron": "0 */5 * * * *", "threadMax": "4", "": ""},
		{"a\"b": "c\\d", "ctl": "\x00\t\n\x1f", "utf8": "été ✓ 𝄞", "html": "<a href=\"x\">&</a>", "bad": "\xff\xfe"},
	} {
		b := pgcluster.AppendObject(m)
		var got map[string]string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q is not JSON: %v", b, err)
		}
		want := maps.Clone(m)
		if _, ok := want["bad"]; ok { // each invalid byte is written as U+FFFD, as encoding/json does
			want["bad"] = "\ufffd\ufffd"
		}
		if !maps.Equal(got, want) {
			t.Errorf("%q reads back as %q, want %q", b, got, want)
		}
	}
}

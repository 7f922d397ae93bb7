package statistics

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/store"
)

// TestStoredEncodingsAreThoseOfTheDataFormat pins the bytes a flush writes
// for a day and a page of rounds. When they change, so does what an older
// build finds in the store: bump store.DataFormat (the stores then refuse
// to be opened by a build that does not know the new encoding, instead of
// skipping and overwriting what it cannot read), and take the new bytes
// here.
func TestStoredEncodingsAreThoseOfTheDataFormat(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	s, err := New("job", clockwork.NewFakeClockAt(at), DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	s.Record(Sample{Round: 1, At: at.Add(50 * time.Millisecond), TaskID: "t", Status: Success, Started: at, Cost: 47 * time.Millisecond})
	s.Record(Sample{Round: 1, At: at.Add(50 * time.Millisecond), TaskID: "u", Status: Failed, Started: at, Cost: 2 * time.Second, Err: errors.New("boom")})
	s.RecordRound(round(1, at, "exec", TaskSample{ID: "t", Started: at, Cost: 47 * time.Millisecond}, TaskSample{ID: "u", Status: Failed, Started: at, Cost: 2 * time.Second, Err: errors.New("boom")}))
	var ch Changes
	s.TakeInto(&ch)
	if len(ch.Days) != 1 || len(ch.Rounds) != 1 {
		t.Fatalf("%d days and %d pages taken", len(ch.Days), len(ch.Rounds))
	}
	const (
		format = 2
		day    = "030402020000000080a7e92c80d0acf30e80f795a00f809bee02809bee0202020000000003021478b009a03802c60102580201870102"
		page   = "010101809b98e8f6c996ec31020200809bee0281a7e92c020200000000020001027400809bee0280a7e92c000001027501809bee0280d0acf30e04626f6f6d000000"
	)
	if store.DataFormat != format {
		t.Fatalf("store.DataFormat is %d: take this format's encodings below", store.DataFormat)
	}
	for _, c := range []struct{ what, got, want string }{
		{"day", hex.EncodeToString(ch.Days[0].Data), day},
		{"page of rounds", hex.EncodeToString(ch.Rounds[0].Data), page},
	} {
		if c.got != c.want {
			t.Errorf("the stored encoding of a %s changed: bump store.DataFormat and pin the new bytes:\n%s", c.what, c.got)
		}
	}
	ch.Done()
}

// A stored day this build cannot read (a higher version byte, as a newer
// build would write) is left as it is: the day's counts of this process
// stay in memory, and no flush overwrites the row. Other days are written
// as usual.
func TestUnreadableDayIsNotOverwritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	defer st.Close()
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	today := dayOf(now)
	yesterday := today.AddDate(0, 0, -1)
	future := []byte{9, 1, 2, 3, 4}
	if err := st.SaveStats(ctx, store.StatsBatch{Days: []store.Day{{Schedule: "job", Day: today, Data: future}}}); err != nil {
		t.Fatal(err)
	}
	clk := clockwork.NewFakeClockAt(now)
	s, _ := New("job", clk, DefaultSettings())
	warnings, err := s.Load(ctx, st)
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "statistics of 2026-11-28 unreadable") || !strings.Contains(warnings[0], "left as it is") {
		t.Fatalf("load: %v %q", err, warnings)
	}
	s.Record(Sample{Round: 1, TaskID: "t", Status: Success, Cost: time.Millisecond})
	s.Record(Sample{Round: 1, At: yesterday.Add(23 * time.Hour), TaskID: "t", Status: Success, Cost: time.Millisecond})
	if err := s.Flush(ctx, st); err != nil {
		t.Fatal(err)
	}
	days, err := st.LoadDays(ctx, "job", yesterday)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, d := range days {
		got[d.Day.Format(time.DateOnly)] = d.Data
	}
	if !bytes.Equal(got["2026-11-28"], future) {
		t.Fatalf("the unreadable day was overwritten: %x", got["2026-11-28"])
	}
	if got["2026-11-27"] == nil {
		t.Fatal("the readable day was not written")
	}
	if n := s.CountsByIndex()[Success]; n != 2 {
		t.Fatalf("counts in memory %d, want 2", n)
	}
}

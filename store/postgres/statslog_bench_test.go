package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fom-go/fom/store"
)

// BenchmarkLogReads reads the statistics of a cluster of three instances
// of 10 000 schedules, each instance's log full (store.LogFlushes flushes
// of its 3 333 schedules' days and pages, 100 bytes each): the reads of
// one schedule an App makes at registration (its own days and last
// round), the page's reads of a schedule's history and of one round, and
// the list's totals of 50 schedules; then the reads of a schedule at
// registration by a new process of the first instance, whose first read
// folds the log it left.
func BenchmarkLogReads(b *testing.B) {
	admin := adminPool(b)
	schema := testSchema(b, admin)
	stores := fullLogs(b, schema)
	ctx := context.Background()
	names := make([]string, 50)
	for i := range names {
		names[i] = fmt.Sprintf("job-%d", i)
	}
	st, own := stores[0], "job-300" // i1's
	for _, r := range []struct {
		name string
		read func() error
	}{
		{"LoadDays", func() error { _, err := st.LoadDays(ctx, own, logDay0); return err }},
		{"LastRoundSeq", func() error { _, err := st.LastRoundSeq(ctx, own); return err }},
		{"LoadRounds", func() error { _, err := st.LoadRounds(ctx, own, 20); return err }},
		{"LoadRound", func() error { _, _, err := st.LoadRound(ctx, own, "i1", 30); return err }},
		{"LoadClusterDaysOf50", func() error { _, err := st.LoadClusterDaysOf(ctx, names, logDay0); return err }},
	} {
		b.Run(r.name, func(b *testing.B) {
			for b.Loop() {
				if err := r.read(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// i1 restarted: its first read folds its log (reported as fold-ms),
	// and its reads at registration go to the tables.
	stores[0].Close()
	again := logStore(b, schema, "i1")
	start := time.Now()
	if _, err := again.LoadDays(ctx, own, logDay0); err != nil {
		b.Fatal(err)
	}
	fold := time.Since(start)
	b.Run("RegistrationReadsAfterRestart", func(b *testing.B) {
		for b.Loop() {
			if _, err := again.LoadDays(ctx, own, logDay0); err != nil {
				b.Fatal(err)
			}
			if _, err := again.LastRoundSeq(ctx, own); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(fold.Microseconds())/1000, "fold-ms")
	})
}

// fullLogs is a cluster of three instances of 10 000 schedules on schema,
// each instance's log full: store.LogFlushes flushes of its 3 333
// schedules' days and pages, 100 bytes each. Instance k+1's schedules are
// job-n with n%3 == k.
func fullLogs(b *testing.B, schema string) []*Store {
	const instances, perInstance = 3, 3333
	ctx := context.Background()
	stores := make([]*Store, instances)
	data := make([]byte, 100)
	for k := range stores {
		stores[k] = logStore(b, schema, fmt.Sprintf("i%d", k+1))
		for f := range store.LogFlushes {
			var batch store.StatsBatch
			for i := range perInstance {
				name := fmt.Sprintf("job-%d", i*instances+k)
				batch.Days = append(batch.Days, store.Day{Schedule: name, Day: logDay0, Data: data})
				seq := int64(5 * (f + 1))
				batch.Rounds = append(batch.Rounds, store.Round{Schedule: name, Slot: f, First: seq - 4, Seq: seq, Start: logDay0, Data: data})
			}
			if err := stores[k].SaveStats(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
	}
	return stores
}

// BenchmarkRetention is a retention run (Prune) of the 10 000 schedules
// of fullLogs, which deletes nothing: its look for the log rows to fold,
// through a store whose every statement runs a generic plan (a prepared
// statement's plan after five runs), as a retention run an hour finds
// them after six hours.
func BenchmarkRetention(b *testing.B) {
	admin := adminPool(b)
	schema := testSchema(b, admin)
	fullLogs(b, schema)
	dsn := testDSN()
	if strings.Contains(dsn, "://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + "plan_cache_mode=force_generic_plan"
	} else {
		dsn += " plan_cache_mode=force_generic_plan"
	}
	st, err := Open(context.Background(), dsn, WithSchema(schema))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	rules := make([]store.Retention, 10_000)
	for i := range rules {
		rules[i] = store.Retention{Schedule: fmt.Sprintf("job-%d", i), Before: logDay0.AddDate(0, 0, -30), KeepFailures: 100, KeepRounds: 50}
	}
	for b.Loop() {
		if err := st.Prune(context.Background(), rules); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPushOut is a flush of 3 333 schedules whose log is full: it
// pushes out the oldest flush, whose pages no newer flush holds, so that
// every page of it is written to rounds. A page's slot is its last
// round's number modulo the history's length (50 rounds by default): a
// schedule firing every second and flushed every 5 s writes a slot again
// ten flushes later, within the log's twelve, but one firing every 2 s,
// or flushed every second, does not.
func BenchmarkPushOut(b *testing.B) {
	const schedules = 3333
	admin := adminPool(b)
	st := logStore(b, testSchema(b, admin), "i1")
	ctx := context.Background()
	data := make([]byte, 100)
	flush := 0
	save := func() {
		var batch store.StatsBatch
		for i := range schedules {
			name := fmt.Sprintf("job-%d", i)
			seq := int64(5 * (flush + 1))
			batch.Days = append(batch.Days, store.Day{Schedule: name, Day: logDay0, Data: data})
			batch.Rounds = append(batch.Rounds, store.Round{Schedule: name, Slot: flush % 64, First: seq - 4, Seq: seq, Start: logDay0, Data: data})
		}
		if err := st.SaveStats(ctx, batch); err != nil {
			b.Fatal(err)
		}
		flush++
	}
	for range store.LogFlushes {
		save()
	}
	for b.Loop() {
		save()
	}
}

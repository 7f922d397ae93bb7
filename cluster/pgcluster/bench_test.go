package pgcluster

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAnnounceAdmit is the process's part of an aligned burst on an
// owner: each schedule announces its fire, the slot is recorded (here
// without a statement), and each fire is admitted. ns/fire is the pair.
func BenchmarkAnnounceAdmit(b *testing.B) {
	const n = 3333
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("job-%d", i)
	}
	c := offline(b, names...)
	base := time.Now().Truncate(time.Second).Add(time.Hour)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		at := base.Add(time.Duration(i) * time.Second)
		i++
		for _, s := range names {
			c.Announce(s, at)
		}
		c.mu.Lock()
		c.slots.Take(c.slotOf(at))
		for _, s := range names {
			c.heralds[s].decide(true)
		}
		c.mu.Unlock()
		for _, s := range names {
			if ok, err := c.Admit(ctx, s, at); !ok || err != nil {
				b.Fatalf("%s at %s refused (%v)", s, at, err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*n), "ns/fire")
}

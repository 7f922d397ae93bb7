package pgcluster

import (
	"context"
	"time"
)

// What the tests (package pgcluster_test, which opens the store that
// builds a Coordinator) reach inside.

func (c *Coordinator) SetLostAnswer(f func() error) { c.lostAnswer = f }

func (c *Coordinator) RenewEvery() time.Duration { return c.o.RenewEvery }

func (c *Coordinator) RenewalAfter(now time.Time) time.Duration { return c.renewalAfter(now) }

func (c *Coordinator) PruneFires(ctx context.Context) { c.pruneFires(ctx) }

// ListenPID is the backend of the listening connection (0: none yet).
func (c *Coordinator) ListenPID() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listenPID
}

func AppendObject(m map[string]string) []byte { return appendObject(nil, m) }

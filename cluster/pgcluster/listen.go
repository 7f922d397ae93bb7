package pgcluster

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Notifications. Every instance LISTENs to the channel: edits, desired
// states, forwarded requests and their answers, leases given back, and
// instances ready to take their share arrive within milliseconds. What a
// lost notification would miss is re-read in full by a resync: when one
// may have been lost, when the live instances change, and once a minute.

// listen delivers the notifications of the channel until stop closes,
// reconnecting after a lost connection. The resync that follows a new
// connection covers what was missed meanwhile.
func (c *Coordinator) listen(stop chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	for ctx.Err() == nil {
		if err := c.listenOnce(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("listening for changes failed; retrying", zap.Error(err))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (c *Coordinator) listenOnce(ctx context.Context) error {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{c.o.Channel}.Sanitize()); err != nil {
		return err
	}
	c.mu.Lock()
	c.listening, c.heard, c.listenPID = true, true, conn.Conn().PgConn().PID()
	join := c.ready
	c.mu.Unlock()
	if join {
		if err := c.join(ctx); err != nil {
			return err
		}
	}
	defer func() {
		c.mu.Lock()
		c.listening = false
		c.mu.Unlock()
		// The connection goes back to the pool: stop listening on it.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, "UNLISTEN *"); err != nil {
			conn.Conn().Close(ctx)
		}
	}()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if !c.control(n.Payload) && c.o.Notified != nil {
			c.o.Notified(n.Payload)
		}
	}
}

// Ready implements cluster.Coordinator: once this instance runs its
// schedules and listens, it tells the others, which rebalance now rather
// than at their next renewal; the leases they give back are heard here
// and taken at once. Asked before its schedules run, the leases would
// come to copies that cannot fire yet.
func (c *Coordinator) Ready() {
	c.mu.Lock()
	c.ready = true
	listening := c.listening
	c.mu.Unlock()
	if listening {
		ctx, cancel := context.WithTimeout(context.Background(), c.o.RenewEvery)
		defer cancel()
		if err := c.join(ctx); err != nil {
			c.log.Warn("asking the others for this instance's share failed; it comes at their next renewal", zap.Error(err))
		}
	}
}

// join tells the other instances that this one can take its share. The
// payload names it, so that it does not rebalance on its own news (its
// tick at start took what was free): a tick of its own then, with another
// instance started and not yet ready, would hand that one leases before
// it runs its schedules.
func (c *Coordinator) join(ctx context.Context) error {
	_, err := c.pool.Exec(ctx, "SELECT pg_notify($1, $2)", c.o.Channel, notifyJoined+":"+c.o.InstanceID)
	return err
}

// Listening reports whether the coordinator hears notifications now.
func (c *Coordinator) Listening() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listening
}

// resyncEvery is how often Resync runs while notifications are heard:
// the fallback for one lost all the same. Every schedule's edits, levels
// and desired state are read by it, so at every tick it would cost the
// store work in proportion to the schedules, every few seconds, for
// changes that notifications already bring.
const resyncEvery = time.Minute

// resyncDue reports whether this tick re-reads what others may have
// changed: when nothing is listened to, or was not for a while (the
// listening connection is new since the last resync), when the live
// instances changed (their declarations with them), and at least every
// resyncEvery.
func (c *Coordinator) resyncDue() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.o.Channel != "" && c.listening && !c.heard && now.Sub(c.lastResync) < resyncEvery {
		return false
	}
	c.heard, c.lastResync = false, now
	return true
}

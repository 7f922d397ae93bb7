package schedule

import (
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/internal/clockx"
)

// maxWait bounds every wait, so that a wall-clock jump (a suspended laptop,
// an NTP step) delays a calendar fire (cron, deadTime) by at most this
// much. Relative waits (task deadlines, fixedRate and fixedDelay fires)
// carry a monotonic reading and are not moved by a wall-clock step at all.
const maxWait = time.Minute

func timerAt(clk clockwork.Clock, t time.Time) clockwork.Timer { return clockx.TimerAt(clk, t) }
func until(clk clockwork.Clock, t time.Time) time.Duration     { return clockx.Until(clk, t) }
func reached(clk clockwork.Clock, t time.Time) bool            { return clockx.Reached(clk, t) }

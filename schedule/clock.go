package schedule

import (
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/internal/clockx"
)

// maxWait bounds every wait, so that a wall-clock jump (a suspended laptop,
// an NTP step) delays a fire by at most this much.
const maxWait = time.Minute

func timerAt(clk clockwork.Clock, t time.Time) clockwork.Timer { return clockx.TimerAt(clk, t) }
func wallUntil(clk clockwork.Clock, t time.Time) time.Duration { return clockx.WallUntil(clk, t) }
func reached(clk clockwork.Clock, t time.Time) bool            { return clockx.Reached(clk, t) }

package schedule

// State is a schedule context's lifecycle state.
type State int32

const (
	Inited State = iota
	Running
	Sleeping
	Stopping
	Stopped
)

func (s State) String() string {
	switch s {
	case Inited:
		return "INITED"
	case Running:
		return "RUNNING"
	case Sleeping:
		return "SLEEPING"
	case Stopping:
		return "STOPPING"
	case Stopped:
		return "STOPPED"
	}
	return "UNKNOWN"
}

// started reports whether the context is started (a timer or its round
// goroutine owns it).
func (s State) started() bool { return s == Running || s == Sleeping }

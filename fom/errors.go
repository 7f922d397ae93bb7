package fom

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of the options and the app.
var (
	ErrEmptyDataDir    = errors.New("fom: data directory is empty")
	ErrNilStore        = errors.New("fom: store is nil")
	ErrNilLogger       = errors.New("fom: logger is nil")
	ErrNilClock        = errors.New("fom: clock is nil")
	ErrNilJob          = errors.New("fom: job is nil")
	ErrDuplicateName   = errors.New("fom: duplicate schedule name")
	ErrUnknownSchedule = errors.New("no schedule of that name")
)

// RegistrationError lists every problem found in one job declaration.
type RegistrationError struct {
	Type     string // e.g. "*main.Cleanup"
	Problems []string
	// Errs are sentinels the problems stand for (ErrDuplicateName), for
	// errors.Is.
	Errs []error
}

func (e *RegistrationError) Error() string {
	return fmt.Sprintf("fom: register %s: %s", e.Type, strings.Join(e.Problems, "; "))
}

// Unwrap returns the sentinels behind the problems.
func (e *RegistrationError) Unwrap() []error { return e.Errs }

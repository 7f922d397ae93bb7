package config

import (
	"fmt"
	"strings"
)

// Problem is one bad key.
type Problem struct {
	Key    string
	Value  string
	Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("key %q value %q: %s", p.Key, p.Value, p.Reason)
}

// ValidationError lists every bad key of one declaration or edit.
type ValidationError struct {
	Schedule string
	Problems []Problem
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("fom: config of schedule %q: %s", e.Schedule, strings.Join(parts, "; "))
}

package config

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Problem is one bad key.
type Problem struct {
	Key    string
	Value  string
	Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("key %q value %q: %s", p.Key, clip(p.Value), p.Reason)
}

// clip shortens a value quoted in a message: a 900 KB paste is named by
// its start and its size, not repeated whole.
func clip(v string) string {
	const n = 80
	if len(v) <= n {
		return v
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", v[:cut], len(v))
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

// Package fxconfig resolves a config struct that an fx graph may supply
// by value or by pointer: fx keeps T and *T as two types, and a config
// that is silently ignored is worse than none.
package fxconfig

import (
	"fmt"
	"reflect"
)

// One returns the supplied config: the pointer's target or the value, and
// an error naming the type when both are supplied.
func One[C any](ptr *C, val C) (C, error) {
	given := !reflect.ValueOf(&val).Elem().IsZero()
	switch {
	case ptr != nil && given:
		var zero C
		return zero, fmt.Errorf("both a %T and a *%T are supplied to fx; supply one", val, val)
	case ptr != nil:
		return *ptr, nil
	}
	return val, nil
}

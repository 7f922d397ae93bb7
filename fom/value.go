package fom

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fom-go/fom/config"
)

// ValueType lists the types a Value may hold (named types over them too).
type ValueType interface {
	~string | ~bool |
		~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 |
		~float32 | ~float64
}

// Value is a runtime-editable setting of a job. Declare it as a field with
// a key and a default:
//
//	BatchSize fom.Value[int] `fom:"batchSize" default:"500"`
//
// Registration binds it to a custom config key: operators edit it on the
// admin page, the edit is persisted, and Get returns the new value at once.
// Get is safe from any goroutine. time.Duration values use Go syntax.
type Value[T ValueType] struct {
	p atomic.Pointer[T]
}

// Get returns the current value (the zero value before registration).
func (v *Value[T]) Get() T {
	if p := v.p.Load(); p != nil {
		return *p
	}
	var zero T
	return zero
}

// Bounds a Value field's tag may set: min and max for numbers and
// durations, oneof (comma separated) for any type.
type bounds struct {
	min, max string
	oneof    []string
}

// parser returns the function that checks a string value (its type and
// the field's bounds), the one that also stores it, the kind and type an
// editor shows, and a hint of the bounds. A bound that is not a value of
// the field's type, or min on a string, is an error.
func (v *Value[T]) parser(b bounds) (parse, set func(string) error, kind, typ, hint string, err error) {
	p := parseAs[T]()
	rt := reflect.TypeFor[T]()
	typ = rt.String()
	kind = kindOf(rt)
	ordered := kind == "int" || kind == "duration" || kind == "number"
	var lo, hi *T
	for _, x := range []struct {
		name, s string
		to      **T
	}{{"min", b.min, &lo}, {"max", b.max, &hi}} {
		if x.s == "" {
			continue
		}
		if !ordered {
			return nil, nil, "", "", "", fmt.Errorf("%s:%q: a %s has no order; use oneof", x.name, x.s, typ)
		}
		val, perr := p(x.s)
		if perr != nil {
			return nil, nil, "", "", "", fmt.Errorf("%s:%q: %v", x.name, x.s, perr)
		}
		*x.to = &val
	}
	if lo != nil && hi != nil && less(*hi, *lo) {
		return nil, nil, "", "", "", fmt.Errorf("min:%q is above max:%q", b.min, b.max)
	}
	var choices []T
	for _, c := range b.oneof {
		val, perr := p(c)
		if perr != nil {
			return nil, nil, "", "", "", fmt.Errorf("oneof:%q: %v", c, perr)
		}
		choices = append(choices, val)
	}
	check := func(s string) (T, error) {
		x, err := p(s)
		if err != nil {
			return x, err
		}
		switch {
		case lo != nil && hi != nil && (less(x, *lo) || less(*hi, x)):
			return x, fmt.Errorf("must be between %s and %s, got %s", b.min, b.max, s)
		case lo != nil && less(x, *lo):
			return x, fmt.Errorf("must be at least %s, got %s", b.min, s)
		case hi != nil && less(*hi, x):
			return x, fmt.Errorf("must be at most %s, got %s", b.max, s)
		case len(choices) > 0 && !slices.Contains(choices, x):
			return x, fmt.Errorf("must be one of %s, got %q", strings.Join(b.oneof, ", "), s)
		}
		return x, nil
	}
	switch {
	case lo != nil && hi != nil:
		hint = b.min + " to " + b.max
	case lo != nil:
		hint = "at least " + b.min
	case hi != nil:
		hint = "at most " + b.max
	case len(choices) > 0:
		hint = "one of " + strings.Join(b.oneof, ", ")
	}
	return func(s string) error { _, err := check(s); return err },
		func(s string) error {
			x, err := check(s)
			if err != nil {
				return err
			}
			v.p.Store(&x)
			return nil
		}, kind, typ, hint, nil
}

// kindOf is how an editor presents a type.
func kindOf(rt reflect.Type) string {
	if rt == reflect.TypeFor[time.Duration]() {
		return "duration"
	}
	switch rt.Kind() {
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "int"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return "text"
}

// less orders two values of a numeric kind.
func less[T ValueType](a, b T) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	switch va.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return va.Int() < vb.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return va.Uint() < vb.Uint()
	case reflect.Float32, reflect.Float64:
		return va.Float() < vb.Float()
	}
	return false
}

// binder is implemented by *Value[T]; registration finds Value fields by it.
type binder interface {
	parser(b bounds) (parse, set func(string) error, kind, typ, hint string, err error)
	// typed parses s as the field's type, for a Validate method.
	typed(s string) (reflect.Value, error)
	valueType() reflect.Type
}

func (v *Value[T]) typed(s string) (reflect.Value, error) {
	x, err := parseAs[T]()(s)
	return reflect.ValueOf(x), err
}

func (v *Value[T]) valueType() reflect.Type { return reflect.TypeFor[T]() }

var _ binder = (*Value[int])(nil)

func parseAs[T ValueType]() func(string) (T, error) {
	rt := reflect.TypeFor[T]()
	return func(s string) (T, error) {
		var out T
		rv := reflect.ValueOf(&out).Elem()
		if rt == reflect.TypeFor[time.Duration]() {
			d, err := config.ParseDuration(s)
			if err != nil {
				return out, err
			}
			rv.SetInt(int64(d))
			return out, nil
		}
		switch rt.Kind() {
		case reflect.String:
			rv.SetString(s)
		case reflect.Bool:
			b, err := config.ParseBool(s)
			if err != nil {
				return out, err
			}
			rv.SetBool(b)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n, err := strconv.ParseInt(s, 10, rt.Bits())
			if err != nil {
				return out, fmt.Errorf("not a %d-bit integer: %s", rt.Bits(), s)
			}
			rv.SetInt(n)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			n, err := strconv.ParseUint(s, 10, rt.Bits())
			if err != nil {
				return out, fmt.Errorf("not an unsigned %d-bit integer: %s", rt.Bits(), s)
			}
			rv.SetUint(n)
		case reflect.Float32, reflect.Float64:
			f, err := strconv.ParseFloat(s, rt.Bits())
			if err != nil {
				return out, fmt.Errorf("not a number: %s", s)
			}
			rv.SetFloat(f)
		}
		return out, nil
	}
}

package fom

import (
	"fmt"
	"reflect"
	"strconv"
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

// parser returns the function that parses and stores a string value.
func (v *Value[T]) parser() (parse func(string) error, set func(string) error, kind string) {
	p := parseAs[T]()
	return func(s string) error { _, err := p(s); return err },
		func(s string) error {
			x, err := p(s)
			if err != nil {
				return err
			}
			v.p.Store(&x)
			return nil
		}, reflect.TypeFor[T]().String()
}

// binder is implemented by *Value[T]; registration finds Value fields by it.
type binder interface {
	parser() (parse func(string) error, set func(string) error, kind string)
}

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

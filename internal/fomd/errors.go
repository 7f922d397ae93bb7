package fomd

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"

	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/timer"
	"github.com/fom-go/fom/timer/webhook"
)

// APIError is every error answer of the REST API:
// {"error": {"code", "message", "field"}} with a real status code.
type APIError struct {
	Status int       `json:"-"`
	Err    ErrorBody `json:"error"`
}

// ErrorBody says what went wrong; Field names the request field at fault
// (as the API names it: "callback.url", "retry.max_attempts", "cursor").
type ErrorBody struct {
	Code    string `json:"code" enum:"bad_request,unauthorized,forbidden,not_found,method_not_allowed,conflict,too_large,unsupported_media_type,invalid,quota_exceeded,unavailable,internal"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (e *APIError) Error() string  { return e.Err.Message }
func (e *APIError) GetStatus() int { return e.Status }

func codeOf(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusUnsupportedMediaType:
		return "unsupported_media_type"
	case http.StatusUnprocessableEntity:
		return "invalid"
	case http.StatusTooManyRequests:
		return "quota_exceeded"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	return "internal"
}

func apiErr(status int, field, format string, args ...any) *APIError {
	return &APIError{Status: status, Err: ErrorBody{Code: codeOf(status), Message: fmt.Sprintf(format, args...), Field: field}}
}

// newError is huma's error constructor for fomd: its own validation
// errors (a missing field, a wrong type, a body too large) in fomd's
// shape, the first detail's location as the field.
func newError(status int, msg string, errs ...error) huma.StatusError {
	e := &APIError{Status: status, Err: ErrorBody{Code: codeOf(status), Message: msg}}
	var parts []string
	for _, err := range errs {
		if err == nil {
			continue
		}
		var d *huma.ErrorDetail
		if errors.As(err, &d) {
			loc := d.Location
			// A missing property is reported on its parent object.
			if name, ok := strings.CutPrefix(d.Message, "expected required property "); ok {
				if name, _, ok = strings.Cut(name, " "); ok {
					loc += "." + name
				}
			}
			if e.Err.Field == "" {
				e.Err.Field = strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(loc, "body."), "query."), "path."), "header.")
			}
			part := d.Message
			if d.Location != "" {
				part = d.Location + ": " + part
			}
			switch d.Value.(type) {
			case nil, map[string]any, []any:
			default:
				part += fmt.Sprintf(" (got %v)", d.Value)
			}
			parts = append(parts, part)
			continue
		}
		parts = append(parts, err.Error())
	}
	if len(parts) > 0 {
		e.Err.Message += ": " + strings.Join(parts, "; ")
	}
	if status == http.StatusRequestEntityTooLarge && e.Err.Field == "" {
		e.Err.Field = "body"
	}
	return e
}

// huma keeps its error constructor in package variables; fomd sets them
// once, to pure functions, before the first API is built.
var hookErrors sync.Once

func installErrors() {
	hookErrors.Do(func() {
		huma.NewError = newError
		huma.NewErrorWithContext = func(_ huma.Context, status int, msg string, errs ...error) huma.StatusError {
			return newError(status, msg, errs...)
		}
	})
}

// fromService maps the timer service's and the stores' errors to answers.
func fromService(err error) error {
	var se *timer.SpecError
	var fe *webhook.FieldError
	var ae *APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &fe):
		return apiErr(http.StatusUnprocessableEntity, fe.Field, "%s", fe.Error())
	case errors.As(err, &se):
		return apiErr(http.StatusUnprocessableEntity, specField(se.Field), "%s", se.Error())
	case errors.Is(err, timer.ErrDuplicate), errors.Is(err, store.ErrDuplicateNamespace):
		return apiErr(http.StatusConflict, "name", "%s", err.Error())
	case errors.Is(err, timer.ErrNotFound):
		return apiErr(http.StatusNotFound, "", "%s", err.Error())
	case errors.Is(err, timer.ErrQuota):
		return apiErr(http.StatusTooManyRequests, "", "%s", err.Error())
	case errors.Is(err, timer.ErrNotDead):
		return apiErr(http.StatusConflict, "planned", "%s", err.Error())
	case errors.Is(err, timer.ErrStopped):
		return apiErr(http.StatusServiceUnavailable, "", "%s", err.Error())
	}
	return apiErr(http.StatusInternalServerError, "", "%s", err.Error())
}

// specField is a timer.Spec field as the REST API names it.
func specField(f string) string {
	switch f {
	case "timeout":
		return "callback.timeout"
	case "payload":
		return "callback"
	}
	return f
}

package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"
)

const (
	csrfCookie = "fom_csrf"
	csrfField  = "csrf_token"
	csrfHeader = "X-CSRF-Token"
)

func isMutation(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// authenticate enforces the configured credentials: 401 when none are
// given, 403 when they are wrong.
func (h *handler) authenticate(next http.Handler) http.Handler {
	basic := h.o.BasicAuthUser != ""
	bearer := h.o.BearerToken != ""
	if !basic && !bearer {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.o.Scope == ProtectMutations && !isMutation(r) {
			next.ServeHTTP(w, r)
			return
		}
		authz := r.Header.Get("Authorization")
		if authz == "" {
			if basic {
				w.Header().Set("WWW-Authenticate", `Basic realm="fom", charset="UTF-8"`)
			} else {
				w.Header().Set("WWW-Authenticate", `Bearer realm="fom"`)
			}
			h.refuse(w, r, http.StatusUnauthorized, "authentication required")
			return
		}
		ok := false
		if u, p, isBasic := r.BasicAuth(); isBasic && basic {
			ok = equal(u, h.o.BasicAuthUser) && equal(p, h.o.BasicAuthPassword)
		} else if tok, isBearer := strings.CutPrefix(authz, "Bearer "); isBearer && bearer {
			ok = equal(strings.TrimSpace(tok), h.o.BearerToken)
		}
		if !ok {
			h.refuse(w, r, http.StatusForbidden, "wrong credentials")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// sameOrigin refuses mutations a browser sent from another site: the
// Origin header, or Sec-Fetch-Site, must say the request is ours. Clients
// that send neither (curl, scripts) are not browsers and pass.
func (h *handler) sameOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isMutation(r) {
			if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
				h.refuse(w, r, http.StatusForbidden, "cross-site request refused")
				return
			}
			if o := r.Header.Get("Origin"); o != "" && o != "null" {
				u, err := url.Parse(o)
				if err != nil || !strings.EqualFold(u.Host, r.Host) {
					h.refuse(w, r, http.StatusForbidden, "cross-origin request refused")
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// csrf checks the double-submit token of form posts: the form field (or
// the htmx header) must equal the cookie set with the page.
func (h *handler) csrf(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(csrfCookie)
		token := r.Header.Get(csrfHeader)
		if token == "" {
			token = r.PostFormValue(csrfField)
		}
		if err != nil || c.Value == "" || token == "" || !equal(c.Value, token) {
			h.refuse(w, r, http.StatusForbidden, "missing or wrong CSRF token; reload the page and try again")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// csrfToken returns the request's token, setting the cookie if needed.
func (h *handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 64 {
		return c.Value
	}
	b := make([]byte, 32)
	rand.Read(b)
	tok := hex.EncodeToString(b)
	path := h.base + "/"
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: tok, Path: path, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return tok
}

func (h *handler) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.log.Info("request refused", zap.Int("status", status), zap.String("reason", msg), zap.String("method", r.Method), zap.String("path", r.URL.Path))
	if h.isAPI(r) {
		h.jsonError(w, status, msg, nil)
		return
	}
	http.Error(w, msg, status)
}

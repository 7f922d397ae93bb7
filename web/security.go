package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"

	"go.uber.org/zap"
)

// How the handler defends itself:
//
//   - Host: only the configured host names are served (loopback names by
//     default), so a page that rebinds its own DNS name to 127.0.0.1
//     cannot read or change anything.
//   - Cross-origin: mutations from another origin are refused with Go's
//     http.CrossOriginProtection (Sec-Fetch-Site, else Origin against a
//     Host already checked), and an Origin of "null" is refused outright.
//   - CSRF: forms carry a token that is an HMAC, under a secret of this
//     handler, of a random cookie: one who can set the cookie still cannot
//     compute the token.
//   - Credentials, when configured, are compared in constant time, user
//     and password both.

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

// hostAllowed reports whether the request's Host names this handler.
func (h *handler) hostAllowed(host string) bool {
	if hh, _, err := net.SplitHostPort(host); err == nil {
		host = hh
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if len(h.o.AllowedHosts) == 0 {
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			return true
		}
		ip := net.ParseIP(host)
		return ip != nil && ip.IsLoopback()
	}
	for _, p := range h.o.AllowedHosts {
		p = strings.ToLower(strings.Trim(p, "[]"))
		switch {
		case p == "*" || p == host:
			return true
		case strings.HasPrefix(p, "*.") && strings.HasSuffix(host, p[1:]):
			return true
		}
	}
	return false
}

// allowHost refuses requests for a host the handler does not serve.
func (h *handler) allowHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.hostAllowed(r.Host) {
			h.refuse(w, r, http.StatusForbidden, fmt.Sprintf("host %q is not served here: add it to web.Options.AllowedHosts", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
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
		scheme, cred, _ := strings.Cut(authz, " ")
		if u, p, isBasic := r.BasicAuth(); isBasic && basic {
			// Both compared, whatever the first says.
			userOK := equal(u, h.o.BasicAuthUser)
			passOK := equal(p, h.o.BasicAuthPassword)
			ok = userOK && passOK
		} else if strings.EqualFold(scheme, "Bearer") && bearer {
			ok = equal(strings.TrimSpace(cred), h.o.BearerToken)
		}
		if !ok {
			h.refuse(w, r, http.StatusForbidden, "wrong credentials")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// equal compares in constant time, lengths included (both are hashed).
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// sameOrigin refuses mutations a browser sent from another origin. Clients
// that send neither Sec-Fetch-Site nor Origin (curl, scripts) are not
// browsers and pass.
func (h *handler) sameOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isMutation(r) {
			if r.Header.Get("Origin") == "null" {
				h.refuse(w, r, http.StatusForbidden, "cross-origin request refused")
				return
			}
			if err := h.cop.Check(r); err != nil {
				h.refuse(w, r, http.StatusForbidden, "cross-origin request refused")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// csrf checks the token of form posts: the form field (or the htmx
// header) must be the HMAC of the cookie set with the page.
func (h *handler) csrf(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(csrfCookie)
		token := r.Header.Get(csrfHeader)
		if token == "" {
			token = r.PostFormValue(csrfField)
		}
		if err != nil || c.Value == "" || token == "" || !equal(h.csrfMAC(c.Value), token) {
			h.refuse(w, r, http.StatusForbidden, "missing or wrong CSRF token; reload the page and try again")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (h *handler) csrfMAC(nonce string) string {
	m := hmac.New(sha256.New, h.secret[:])
	m.Write([]byte(nonce))
	return hex.EncodeToString(m.Sum(nil))
}

// csrfToken returns the request's token, setting the cookie if needed.
func (h *handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 64 {
		return h.csrfMAC(c.Value)
	}
	b := make([]byte, 32)
	rand.Read(b)
	nonce := hex.EncodeToString(b)
	path := h.base + "/"
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: nonce, Path: path, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return h.csrfMAC(nonce)
}

func (h *handler) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.log.Info("request refused", zap.Int("status", status), zap.String("reason", msg), zap.String("method", r.Method), zap.String("path", r.URL.Path))
	if h.isAPI(r) {
		h.jsonError(w, status, msg, nil)
		return
	}
	http.Error(w, msg, status)
}

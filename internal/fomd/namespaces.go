package fomd

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/timer"
	"github.com/fom-go/fom/timer/webhook"
)

// A namespace is a tenant: its bearer token (kept hashed), its signing
// secrets and its limits. Every instance keeps the namespaces in a cache
// re-read from the store each Refresh (another instance's changes), and
// puts their limits in force in its timer service. A token unknown to the
// cache is looked up in the store at once, so a namespace made on another
// instance works there at once; one deleted elsewhere stops working at
// the next refresh.

// secret is a signing secret in force; a rotated-out one until Expires.
type secret struct {
	Secret  string `json:"secret"`
	Created int64  `json:"created"`
	Expires int64  `json:"expires,omitempty"` // Unix ms; 0: no end
}

type namespace struct {
	store.Namespace
	secrets []secret
}

func decodeNamespace(n store.Namespace) (namespace, error) {
	ns := namespace{Namespace: n}
	if err := json.Unmarshal(n.Secrets, &ns.secrets); err != nil {
		return ns, fmt.Errorf("namespace %q: its secrets are unreadable: %w", n.Name, err)
	}
	return ns, nil
}

// live are the secrets in force at now, newest first.
func (n namespace) live(now time.Time) []string {
	out := make([]string, 0, len(n.secrets))
	for _, s := range n.secrets {
		if s.Expires == 0 || s.Expires > now.UnixMilli() {
			out = append(out, s.Secret)
		}
	}
	return out
}

func (n namespace) limits() timer.Limits {
	return timer.Limits{Rate: n.Rate, Burst: n.Burst, Concurrency: n.Concurrency, MaxTimers: n.MaxTimers}
}

func hashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

func newToken(prefix string) string {
	b := make([]byte, 24)
	rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

var nsNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// namespaces is the cache of one instance.
type namespaces struct {
	st     store.NamespaceStore
	timers *timer.Service
	now    func() time.Time

	mu     sync.Mutex
	byName map[string]namespace
	byHash map[string]string
}

func newNamespaces(st store.NamespaceStore, timers *timer.Service, now func() time.Time) *namespaces {
	return &namespaces{st: st, timers: timers, now: now, byName: map[string]namespace{}, byHash: map[string]string{}}
}

// reload re-reads every namespace and puts their limits in force.
func (c *namespaces) reload(ctx context.Context) error {
	list, err := c.st.ListNamespaces(ctx)
	if err != nil {
		return err
	}
	byName := make(map[string]namespace, len(list))
	byHash := make(map[string]string, len(list))
	fresh := make([]namespace, 0, len(list)) // read after the swap, when put and drop may change byName
	var errs []error
	for _, n := range list {
		ns, err := decodeNamespace(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		byName[n.Name], byHash[n.TokenHash] = ns, n.Name
		fresh = append(fresh, ns)
	}
	c.mu.Lock()
	old := c.byName // no one else holds it after the swap
	c.byName, c.byHash = byName, byHash
	c.mu.Unlock()
	seen := make(map[string]bool, len(fresh))
	for _, ns := range fresh {
		seen[ns.Name] = true
		if o, ok := old[ns.Name]; !ok || o.limits() != ns.limits() {
			if err := c.timers.SetLimits(ns.Name, ns.limits()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for name := range old {
		if !seen[name] {
			c.timers.SetLimits(name, timer.Limits{})
		}
	}
	return errors.Join(errs...)
}

// put records n in the cache (after this instance wrote it).
func (c *namespaces) put(n namespace) {
	c.mu.Lock()
	if o, ok := c.byName[n.Name]; ok {
		delete(c.byHash, o.TokenHash)
	}
	c.byName[n.Name], c.byHash[n.TokenHash] = n, n.Name
	c.mu.Unlock()
	c.timers.SetLimits(n.Name, n.limits())
}

func (c *namespaces) drop(name string) {
	c.mu.Lock()
	if o, ok := c.byName[name]; ok {
		delete(c.byHash, o.TokenHash)
		delete(c.byName, name)
	}
	c.mu.Unlock()
	c.timers.SetLimits(name, timer.Limits{})
}

// get is a namespace from the cache, else from the store.
func (c *namespaces) get(ctx context.Context, name string) (namespace, bool, error) {
	c.mu.Lock()
	n, ok := c.byName[name]
	c.mu.Unlock()
	return c.orStore(n, ok, func() (store.Namespace, bool, error) { return c.st.GetNamespace(ctx, name) })
}

// byToken finds the namespace of a bearer token.
func (c *namespaces) byToken(ctx context.Context, tok string) (namespace, bool, error) {
	h := hashToken(tok)
	c.mu.Lock()
	name, ok := c.byHash[h]
	n := c.byName[name]
	c.mu.Unlock()
	return c.orStore(n, ok, func() (store.Namespace, bool, error) { return c.st.NamespaceByToken(ctx, h) })
}

// orStore is n when the cache had it, else what read finds, then cached.
func (c *namespaces) orStore(n namespace, cached bool, read func() (store.Namespace, bool, error)) (namespace, bool, error) {
	if cached {
		return n, true, nil
	}
	sn, ok, err := read()
	if err != nil || !ok {
		return namespace{}, false, err
	}
	if n, err = decodeNamespace(sn); err != nil {
		return n, false, err
	}
	c.put(n)
	return n, true, nil
}

// secrets is webhook.Options.Secrets: the secrets in force.
func (c *namespaces) secrets(ctx context.Context, name string) ([]string, error) {
	n, ok, err := c.get(ctx, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, timer.Permanent(fmt.Errorf("namespace %q does not exist (deleted?): nothing to sign with", name))
	}
	s := n.live(c.now())
	if len(s) == 0 {
		return nil, timer.Permanent(fmt.Errorf("namespace %q has no signing secret in force", name))
	}
	return s, nil
}

// principal is who a request is.
type principal struct {
	admin     bool
	namespace string
}

type principalKey struct{}

func principalOf(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// authenticate maps a bearer token to its principal.
func (s *Server) authenticate(ctx context.Context, tok string) (principal, bool, error) {
	if tok == "" {
		return principal{}, false, nil
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.adminToken)) == 1 {
		return principal{admin: true}, true, nil
	}
	n, ok, err := s.ns.byToken(ctx, tok)
	if err != nil || !ok {
		return principal{}, false, err
	}
	return principal{namespace: n.Name}, true, nil
}

// ensureDefault makes the namespace "default" when the store has none,
// so that a first timer needs no namespace set up first.
func (s *Server) ensureDefault(ctx context.Context) error {
	list, err := s.ns.st.ListNamespaces(ctx)
	if err != nil || len(list) > 0 {
		return err
	}
	_, _, err = s.createNamespace(ctx, namespaceIn{Name: "default"})
	if errors.Is(err, store.ErrDuplicateNamespace) { // another instance made it
		return nil
	}
	return err
}

// createNamespace stores a new namespace: its token and its secret are
// returned once, here (the token is kept only hashed).
func (s *Server) createNamespace(ctx context.Context, in namespaceIn) (namespace, string, error) {
	now := s.clock.Now()
	sec := webhook.NewSecret()
	if in.Secret != "" {
		sec = in.Secret
	}
	tok := newToken("fomns_")
	secrets, _ := json.Marshal([]secret{{Secret: sec, Created: now.UnixMilli()}})
	sn := store.Namespace{Name: in.Name, TokenHash: hashToken(tok), Secrets: secrets, Created: now.UnixMilli(), Updated: now.UnixMilli(),
		Rate: s.cfg.DefaultRate, Burst: s.cfg.DefaultBurst, Concurrency: s.cfg.DefaultConcurrency, MaxTimers: s.cfg.DefaultMaxTimers}
	in.apply(&sn)
	if err := s.ns.st.InsertNamespace(ctx, sn); err != nil {
		return namespace{}, "", err
	}
	n, err := decodeNamespace(sn)
	if err != nil {
		return n, "", err
	}
	s.ns.put(n)
	return n, tok, nil
}

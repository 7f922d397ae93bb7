package fomd

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/timer/webhook"
)

// namespaceIn creates or changes a namespace; limits left out keep their
// value (the server's defaults for a new one).
type namespaceIn struct {
	Name        string   `json:"name,omitempty" doc:"lower case letters, digits, '.', '_' and '-'; at most 63"`
	Rate        *float64 `json:"rate,omitempty" minimum:"0" doc:"deliveries a second (0: no limit)"`
	Burst       *int     `json:"burst,omitempty" minimum:"0" doc:"deliveries at once above the rate"`
	Concurrency *int     `json:"concurrency,omitempty" minimum:"0" doc:"deliveries under way at once (0: no limit)"`
	MaxTimers   *int64   `json:"max_timers,omitempty" minimum:"0" doc:"timers in the namespace (0: no quota)"`
	Secret      string   `json:"secret,omitempty" doc:"a signing secret of your own (whsec_ and base64); default: generated"`
}

func (in namespaceIn) apply(n *store.Namespace) {
	if in.Rate != nil {
		n.Rate = *in.Rate
	}
	if in.Burst != nil {
		n.Burst = *in.Burst
	}
	if in.Concurrency != nil {
		n.Concurrency = *in.Concurrency
	}
	if in.MaxTimers != nil {
		n.MaxTimers = *in.MaxTimers
	}
}

func (in namespaceIn) check() error {
	if in.Rate != nil && (*in.Rate < 0 || math.IsNaN(*in.Rate) || *in.Rate > 1e6) {
		return apiErr(http.StatusUnprocessableEntity, "rate", "rate %v: from 0 to 1000000 deliveries a second", *in.Rate)
	}
	if in.Burst != nil && (*in.Burst < 0 || *in.Burst > 1e6) {
		return apiErr(http.StatusUnprocessableEntity, "burst", "burst %d: from 0 to 1000000", *in.Burst)
	}
	if in.Concurrency != nil && (*in.Concurrency < 0 || *in.Concurrency > 100000) {
		return apiErr(http.StatusUnprocessableEntity, "concurrency", "concurrency %d: from 0 to 100000", *in.Concurrency)
	}
	if in.MaxTimers != nil && *in.MaxTimers < 0 {
		return apiErr(http.StatusUnprocessableEntity, "max_timers", "max_timers %d: not negative", *in.MaxTimers)
	}
	if in.Secret != "" {
		if err := webhook.CheckSecret(in.Secret); err != nil {
			return apiErr(http.StatusUnprocessableEntity, "secret", "secret: %s", err)
		}
	}
	return nil
}

// SecretOut is a signing secret in force.
type SecretOut struct {
	Secret  string     `json:"secret"`
	Created time.Time  `json:"created"`
	Expires *time.Time `json:"expires,omitempty" doc:"a rotated-out secret is sent until then"`
}

// NamespaceOut is a namespace. Token is shown only when it is made (at
// create, and when rotated): it is kept hashed.
type NamespaceOut struct {
	Name        string      `json:"name"`
	Token       string      `json:"token,omitempty"`
	Secret      string      `json:"secret" doc:"the newest signing secret"`
	Secrets     []SecretOut `json:"secrets" doc:"every secret in force, newest first: each is sent a signature"`
	Rate        float64     `json:"rate"`
	Burst       int         `json:"burst"`
	Concurrency int         `json:"concurrency"`
	MaxTimers   int64       `json:"max_timers"`
	Created     time.Time   `json:"created"`
	Updated     time.Time   `json:"updated"`
}

func (s *Server) namespaceOut(n namespace, token string) NamespaceOut {
	o := NamespaceOut{Name: n.Name, Token: token, Rate: n.Rate, Burst: n.Burst, Concurrency: n.Concurrency, MaxTimers: n.MaxTimers,
		Created: time.UnixMilli(n.Created).UTC(), Updated: time.UnixMilli(n.Updated).UTC(), Secrets: []SecretOut{}}
	now := s.clock.Now().UnixMilli()
	for _, sec := range n.secrets {
		if sec.Expires != 0 && sec.Expires <= now {
			continue
		}
		so := SecretOut{Secret: sec.Secret, Created: time.UnixMilli(sec.Created).UTC()}
		if sec.Expires != 0 {
			e := time.UnixMilli(sec.Expires).UTC()
			so.Expires = &e
		}
		o.Secrets = append(o.Secrets, so)
	}
	if len(o.Secrets) > 0 {
		o.Secret = o.Secrets[0].Secret
	}
	return o
}

type nsPath struct {
	Name string `path:"name" maxLength:"63"`
}

type nsBody struct {
	Body NamespaceOut
}

func requireAdmin(ctx context.Context) error {
	if !principalOf(ctx).admin {
		return apiErr(http.StatusForbidden, "", "this call needs the admin token")
	}
	return nil
}

func (s *Server) registerNamespaces(api huma.API) {
	huma.Register(api, huma.Operation{OperationID: "create-namespace", Method: http.MethodPost, Path: "/api/v1/namespaces", Summary: "Create a namespace (admin): its token and secret are in the answer",
		Tags: []string{"namespaces"}, DefaultStatus: http.StatusCreated, Security: bearer(), Errors: []int{401, 403, 409, 422}},
		func(ctx context.Context, in *struct{ Body namespaceIn }) (*nsBody, error) {
			if err := requireAdmin(ctx); err != nil {
				return nil, err
			}
			if !nsNameRE.MatchString(in.Body.Name) {
				return nil, apiErr(http.StatusUnprocessableEntity, "name", "name %q: 1 to 63 lower case letters, digits, '.', '_' or '-', starting with a letter or digit", in.Body.Name)
			}
			if err := in.Body.check(); err != nil {
				return nil, err
			}
			n, tok, err := s.createNamespace(ctx, in.Body)
			if err != nil {
				return nil, fromService(err)
			}
			return &nsBody{s.namespaceOut(n, tok)}, nil
		})

	type nsListOut struct {
		Body struct {
			Namespaces []NamespaceOut `json:"namespaces"`
		}
	}
	huma.Register(api, huma.Operation{OperationID: "list-namespaces", Method: http.MethodGet, Path: "/api/v1/namespaces", Summary: "List namespaces (admin)",
		Tags: []string{"namespaces"}, Security: bearer(), Errors: []int{401, 403}},
		func(ctx context.Context, _ *struct{}) (*nsListOut, error) {
			if err := requireAdmin(ctx); err != nil {
				return nil, err
			}
			list, err := s.ns.st.ListNamespaces(ctx)
			if err != nil {
				return nil, fromService(err)
			}
			out := &nsListOut{}
			out.Body.Namespaces = make([]NamespaceOut, 0, len(list))
			for _, sn := range list {
				n, err := decodeNamespace(sn)
				if err != nil {
					return nil, fromService(err)
				}
				out.Body.Namespaces = append(out.Body.Namespaces, s.namespaceOut(n, ""))
			}
			return out, nil
		})

	// visible reads a namespace the request may see: its own, or any with
	// the admin token.
	visible := func(ctx context.Context, name string) (namespace, error) {
		if p := principalOf(ctx); !p.admin && p.namespace != name {
			return namespace{}, apiErr(http.StatusNotFound, "name", "namespace %q not found", name)
		}
		sn, ok, err := s.ns.st.GetNamespace(ctx, name)
		if err != nil {
			return namespace{}, fromService(err)
		}
		if !ok {
			return namespace{}, apiErr(http.StatusNotFound, "name", "namespace %q not found", name)
		}
		n, err := decodeNamespace(sn)
		return n, fromService(err)
	}
	huma.Register(api, huma.Operation{OperationID: "get-namespace", Method: http.MethodGet, Path: "/api/v1/namespaces/{name}", Summary: "Get a namespace (admin, or its own token)",
		Tags: []string{"namespaces"}, Security: bearer(), Errors: []int{401, 404}},
		func(ctx context.Context, in *nsPath) (*nsBody, error) {
			n, err := visible(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			return &nsBody{s.namespaceOut(n, "")}, nil
		})

	type nsPatchIn struct {
		Name string `path:"name" maxLength:"63"`
		Body struct {
			Rate         *float64 `json:"rate,omitempty" minimum:"0"`
			Burst        *int     `json:"burst,omitempty" minimum:"0"`
			Concurrency  *int     `json:"concurrency,omitempty" minimum:"0"`
			MaxTimers    *int64   `json:"max_timers,omitempty" minimum:"0"`
			RotateSecret bool     `json:"rotate_secret,omitempty" doc:"make a new signing secret; the current one is still sent until rotate_grace has passed"`
			RotateGrace  string   `json:"rotate_grace,omitempty" doc:"how long the old secret stays in force (default 24h; 0s: at once)"`
			RotateToken  bool     `json:"rotate_token,omitempty" doc:"make a new bearer token; the old one stops working at once"`
		}
	}
	huma.Register(api, huma.Operation{OperationID: "update-namespace", Method: http.MethodPatch, Path: "/api/v1/namespaces/{name}", Summary: "Change a namespace's limits, rotate its secret or token (admin)",
		Tags: []string{"namespaces"}, Security: bearer(), Errors: []int{401, 403, 404, 422}},
		func(ctx context.Context, in *nsPatchIn) (*nsBody, error) {
			if err := requireAdmin(ctx); err != nil {
				return nil, err
			}
			n, err := visible(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			b := in.Body
			lim := namespaceIn{Rate: b.Rate, Burst: b.Burst, Concurrency: b.Concurrency, MaxTimers: b.MaxTimers}
			if err := lim.check(); err != nil {
				return nil, err
			}
			sn := n.Namespace
			lim.apply(&sn)
			now := s.clock.Now()
			sn.Updated = now.UnixMilli()
			secrets := n.secrets
			if b.RotateSecret {
				grace := 24 * time.Hour
				if b.RotateGrace != "" {
					if grace, err = time.ParseDuration(b.RotateGrace); err != nil || grace < 0 || grace > 30*24*time.Hour {
						return nil, apiErr(http.StatusUnprocessableEntity, "rotate_grace", "rotate_grace %q: a Go duration from 0s to 720h", b.RotateGrace)
					}
				}
				kept := []secret{{Secret: webhook.NewSecret(), Created: now.UnixMilli()}}
				for _, old := range secrets {
					if old.Expires != 0 && old.Expires <= now.UnixMilli() {
						continue
					}
					if old.Expires == 0 || old.Expires > now.Add(grace).UnixMilli() {
						old.Expires = now.Add(grace).UnixMilli()
					}
					if grace > 0 {
						kept = append(kept, old)
					}
				}
				secrets = kept
			} else if b.RotateGrace != "" {
				return nil, apiErr(http.StatusUnprocessableEntity, "rotate_grace", "rotate_grace without rotate_secret")
			}
			sn.Secrets, _ = json.Marshal(secrets)
			tok := ""
			if b.RotateToken {
				tok = newToken("fomns_")
				sn.TokenHash = hashToken(tok)
			}
			if ok, err := s.ns.st.UpdateNamespace(ctx, sn); err != nil {
				return nil, fromService(err)
			} else if !ok {
				return nil, apiErr(http.StatusNotFound, "name", "namespace %q not found", in.Name)
			}
			n, err = decodeNamespace(sn)
			if err != nil {
				return nil, fromService(err)
			}
			s.ns.put(n)
			return &nsBody{s.namespaceOut(n, tok)}, nil
		})

	huma.Register(api, huma.Operation{OperationID: "delete-namespace", Method: http.MethodDelete, Path: "/api/v1/namespaces/{name}", Summary: "Delete a namespace without timers (admin)",
		Tags: []string{"namespaces"}, Security: bearer(), DefaultStatus: http.StatusNoContent, Errors: []int{401, 403, 404, 409}},
		func(ctx context.Context, in *nsPath) (*struct{}, error) {
			if err := requireAdmin(ctx); err != nil {
				return nil, err
			}
			n, err := s.timers.Count(ctx, in.Name)
			if err != nil {
				return nil, fromService(err)
			}
			if n > 0 {
				return nil, apiErr(http.StatusConflict, "name", "namespace %q still has %d timers: delete them first", in.Name, n)
			}
			ok, err := s.ns.st.DeleteNamespace(ctx, in.Name)
			if err != nil {
				return nil, fromService(err)
			}
			if !ok {
				return nil, apiErr(http.StatusNotFound, "name", "namespace %q not found", in.Name)
			}
			s.ns.drop(in.Name)
			return nil, nil
		})
}

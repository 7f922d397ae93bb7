package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/fom-go/fom/store"
)

// namespacesKeptAndFound runs on every store that keeps the timer
// service's namespaces.
func namespacesKeptAndFound(t *testing.T, s store.Store) {
	ns, ok := s.(store.NamespaceStore)
	if !ok {
		t.Skipf("%T keeps no namespaces", s)
	}
	ctx := context.Background()
	a := store.Namespace{Name: "billing", TokenHash: "h1", Secrets: []byte(`[{"secret":"whsec_a"}]`), Rate: 2.5, Burst: 3, Concurrency: 4, MaxTimers: 100, Created: 1, Updated: 1}
	if err := ns.InsertNamespace(ctx, a); err != nil {
		t.Fatal(err)
	}
	for _, dup := range []store.Namespace{{Name: "billing", TokenHash: "h9", Secrets: []byte(`[]`)}, {Name: "other", TokenHash: "h1", Secrets: []byte(`[]`)}} {
		if err := ns.InsertNamespace(ctx, dup); !errors.Is(err, store.ErrDuplicateNamespace) {
			t.Fatalf("insert of %q (token hash %q) again: %v, want ErrDuplicateNamespace", dup.Name, dup.TokenHash, err)
		}
	}
	if err := ns.InsertNamespace(ctx, store.Namespace{Name: "alpha", TokenHash: "h2", Secrets: []byte(`[]`), Created: 2, Updated: 2}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := ns.GetNamespace(ctx, "billing")
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if got.Rate != 2.5 || got.Burst != 3 || got.Concurrency != 4 || got.MaxTimers != 100 || got.TokenHash != "h1" {
		t.Fatalf("get: %+v", got)
	}
	if string(got.Secrets) != `[{"secret": "whsec_a"}]` && string(got.Secrets) != `[{"secret":"whsec_a"}]` {
		t.Fatalf("secrets %s", got.Secrets)
	}
	byTok, ok, err := ns.NamespaceByToken(ctx, "h2")
	if err != nil || !ok || byTok.Name != "alpha" {
		t.Fatalf("by token: %+v %v %v", byTok, ok, err)
	}
	if _, ok, _ := ns.NamespaceByToken(ctx, "nope"); ok {
		t.Fatal("found a namespace by an unknown token")
	}
	got.Rate, got.TokenHash, got.Updated, got.Created = 9, "h3", 5, 99
	if ok, err := ns.UpdateNamespace(ctx, got); err != nil || !ok {
		t.Fatalf("update: %v %v", ok, err)
	}
	if ok, err := ns.UpdateNamespace(ctx, store.Namespace{Name: "ghost", Secrets: []byte(`[]`)}); err != nil || ok {
		t.Fatalf("update of a missing namespace: %v %v", ok, err)
	}
	list, err := ns.ListNamespaces(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "alpha" || list[1].Name != "billing" || list[1].Rate != 9 || list[1].Created != 1 || list[1].TokenHash != "h3" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if ok, err := ns.DeleteNamespace(ctx, "alpha"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, err := ns.DeleteNamespace(ctx, "alpha"); err != nil || ok {
		t.Fatalf("delete again: %v %v", ok, err)
	}
}

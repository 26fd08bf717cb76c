package podindex

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

func pod(ns, name string, l map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l}}
}

func names(ps []*corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	slices.Sort(out)
	return out
}

// TestList: with and without the index, List answers what matching every
// pod of the namespace answers.
func TestList(t *testing.T) {
	pods := []*corev1.Pod{
		pod("a", "web-1", map[string]string{"app": "web", "tier": "front"}),
		pod("a", "web-2", map[string]string{"app": "web", "tier": "back"}),
		pod("a", "db-1", map[string]string{"app": "db", "tier": "back"}),
		pod("a", "bare", nil),
		pod("b", "web-1", map[string]string{"app": "web", "tier": "front"}),
	}
	for _, tc := range []struct {
		name string
		ns   string
		sel  string
		want []string
	}{
		{"equality", "a", "app=web", []string{"a/web-1", "a/web-2"}},
		{"double equals", "a", "app==db", []string{"a/db-1"}},
		{"in with one value", "a", "app in (web)", []string{"a/web-1", "a/web-2"}},
		{"equality and more", "a", "app=web,tier!=front", []string{"a/web-2"}},
		{"equality on the second key", "a", "tier=back,app in (web,db)", []string{"a/db-1", "a/web-2"}},
		{"in with two values: no index key", "a", "app in (web,db)", []string{"a/db-1", "a/web-1", "a/web-2"}},
		{"existence only: no index key", "a", "tier", []string{"a/db-1", "a/web-1", "a/web-2"}},
		{"not equal only", "a", "app!=web", []string{"a/bare", "a/db-1"}},
		{"other namespace", "b", "app=web", []string{"b/web-1"}},
		{"no match", "a", "app=cache", nil},
		{"everything", "b", "", []string{"b/web-1"}},
	} {
		sel, err := labels.Parse(tc.sel)
		if err != nil {
			t.Fatal(err)
		}
		for _, indexed := range []bool{true, false} {
			t.Run(tc.name+map[bool]string{true: "/indexed", false: "/scan"}[indexed], func(t *testing.T) {
				idx := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
				if indexed {
					idx[Name] = IndexFunc
				}
				store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, idx)
				for _, p := range pods {
					if err := store.Add(p); err != nil {
						t.Fatal(err)
					}
				}
				l := New(store)
				if l.indexed != indexed {
					t.Fatalf("indexed = %v, want %v", l.indexed, indexed)
				}
				got, err := l.List(tc.ns, sel)
				if err != nil {
					t.Fatal(err)
				}
				if n := names(got); !slices.Equal(n, tc.want) {
					t.Errorf("List(%q, %q) = %v, want %v", tc.ns, tc.sel, n, tc.want)
				}
			})
		}
	}
}

// TestListFollowsUpdates: a pod relabelled or deleted leaves the index.
func TestListFollowsUpdates(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{Name: IndexFunc})
	p := pod("a", "p", map[string]string{"app": "web"})
	if err := store.Add(p); err != nil {
		t.Fatal(err)
	}
	l := New(store)
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	db := labels.SelectorFromSet(labels.Set{"app": "db"})
	check := func(step string, sel labels.Selector, want []string) {
		t.Helper()
		got, err := l.List("a", sel)
		if err != nil {
			t.Fatal(err)
		}
		if n := names(got); !slices.Equal(n, want) {
			t.Errorf("%s: %v, want %v", step, n, want)
		}
	}
	check("added", web, []string{"a/p"})
	if err := store.Update(pod("a", "p", map[string]string{"app": "db"})); err != nil {
		t.Fatal(err)
	}
	check("relabelled, old label", web, nil)
	check("relabelled, new label", db, []string{"a/p"})
	if err := store.Delete(pod("a", "p", nil)); err != nil {
		t.Fatal(err)
	}
	check("deleted", db, nil)
}

func TestIndexFuncRejectsOtherTypes(t *testing.T) {
	if _, err := IndexFunc(&corev1.Node{}); err == nil {
		t.Error("IndexFunc accepted a Node")
	}
}

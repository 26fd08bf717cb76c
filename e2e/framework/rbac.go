package framework

import (
	"context"
	"fmt"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GrantRenamed lets ServiceAccount saNamespace/sa do to objects named
// rename[x] exactly what the installed Role namespace/role (a ClusterRole
// when namespace is empty) lets it do to objects named x.
//
// deploy/ limits get and update of a component's Lease, Secret and
// MutatingWebhookConfiguration to their production names. Tests that run
// side by side on one control plane must not share those objects, so they
// give them names that include the test namespace; this copies only the
// rules limited by resourceNames, with the names substituted, so every verb
// and resource still comes from deploy/. The copy is named name (a
// Role/RoleBinding in namespace, or a ClusterRole/ClusterRoleBinding) and is
// deleted when the test ends.
func (tb *Testbed) GrantRenamed(t testing.TB, namespace, role, saNamespace, sa, name string, rename map[string]string) {
	t.Helper()
	ctx := context.Background()
	var rules []rbacv1.PolicyRule
	if namespace == "" {
		cr, err := tb.Client.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("read ClusterRole %s: %v", role, err)
		}
		rules = cr.Rules
	} else {
		r, err := tb.Client.RbacV1().Roles(namespace).Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("read Role %s/%s: %v", namespace, role, err)
		}
		rules = r.Rules
	}
	renamed := renameRules(rules, rename)
	if len(renamed) == 0 {
		t.Fatalf("%s names none of %v: nothing to grant", role, rename)
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: saNamespace}}
	if namespace == "" {
		roles, bindings := tb.Client.RbacV1().ClusterRoles(), tb.Client.RbacV1().ClusterRoleBindings()
		if _, err := roles.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: renamed}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ClusterRole %s: %v", name, err)
		}
		t.Cleanup(func() {
			deleteLogged(t, "ClusterRole "+name, roles.Delete(context.Background(), name, metav1.DeleteOptions{}))
		})
		if _, err := bindings.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   subject,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ClusterRoleBinding %s: %v", name, err)
		}
		t.Cleanup(func() {
			deleteLogged(t, "ClusterRoleBinding "+name, bindings.Delete(context.Background(), name, metav1.DeleteOptions{}))
		})
		return
	}
	roles, bindings := tb.Client.RbacV1().Roles(namespace), tb.Client.RbacV1().RoleBindings(namespace)
	if _, err := roles.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: renamed}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Role %s/%s: %v", namespace, name, err)
	}
	t.Cleanup(func() {
		deleteLogged(t, "Role "+name, roles.Delete(context.Background(), name, metav1.DeleteOptions{}))
	})
	if _, err := bindings.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   subject,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RoleBinding %s/%s: %v", namespace, name, err)
	}
	t.Cleanup(func() {
		deleteLogged(t, "RoleBinding "+name, bindings.Delete(context.Background(), name, metav1.DeleteOptions{}))
	})
}

// renameRules keeps the rules limited by resourceNames to a key of rename,
// with those names replaced by their values; other names are dropped.
func renameRules(rules []rbacv1.PolicyRule, rename map[string]string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		var names []string
		for _, n := range r.ResourceNames {
			if to, ok := rename[n]; ok && !slices.Contains(names, to) {
				names = append(names, to)
			}
		}
		if len(names) == 0 {
			continue
		}
		r = *r.DeepCopy()
		r.ResourceNames = names
		out = append(out, r)
	}
	return out
}

func deleteLogged(t testing.TB, what string, err error) {
	if err != nil {
		t.Errorf("delete %s: %v", what, fmt.Errorf("cleanup: %w", err))
	}
}

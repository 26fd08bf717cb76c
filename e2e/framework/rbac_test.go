package framework

import (
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

func TestRenameRules(t *testing.T) {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"aware-updater"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"aware-admission-controller", "other"}, Verbs: []string{"get"}},
	}
	for _, tc := range []struct {
		name   string
		rename map[string]string
		want   []rbacv1.PolicyRule
	}{
		{"nothing named", map[string]string{"absent": "x"}, nil},
		{"one rule renamed, unnamed rules dropped", map[string]string{"aware-updater": "aware-updater-ns1"}, []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"aware-updater-ns1"}, Verbs: []string{"get", "update"}},
		}},
		{"names not renamed are dropped from a rule", map[string]string{"aware-admission-controller": "hb-ns1", "aware-updater": "aware-updater-ns1"}, []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"aware-updater-ns1"}, Verbs: []string{"get", "update"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"hb-ns1"}, Verbs: []string{"get"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := renameRules(rules, tc.rename)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if rules[1].ResourceNames[0] != "aware-updater" {
		t.Fatal("renameRules modified its input")
	}
}

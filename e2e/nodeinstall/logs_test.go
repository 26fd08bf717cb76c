package nodeinstall

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestKeepPodLogs(t *testing.T) {
	write := func(t *testing.T, root string, files map[string]string) {
		t.Helper()
		for name, body := range files {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	list := func(t *testing.T, root string) map[string]string {
		t.Helper()
		got := map[string]string{}
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			got[rel] = string(b)
			return nil
		})
		return got
	}
	for _, tc := range []struct {
		name    string
		files   map[string]string // under pod-logs
		noDir   bool
		want    []string
		wantErr bool
	}{
		{
			name: "the namespace's containers, rotated files too; other namespaces left",
			files: map[string]string{
				"aware-system_recommender-abc_u1/recommender/0.log":                   "r0",
				"aware-system_recommender-abc_u1/recommender/1.log":                   "r1",
				"aware-system_updater-def_u2/updater/0.log.20261201-030000":           "u-rotated",
				"aware-system_updater-def_u2/updater/0.log":                           "u0",
				"bench-real_testapp-xyz_u3/testapp/0.log":                             "app",
				"aware-system-other_recommender-abc_u4/recommender/0.log":             "other",
				"aware-systemx_p_u5/c/0.log":                                          "prefix only",
				"kube-system_aware-system_recommender_u6/recommender/0.log.gz":        "wrong namespace",
				"aware-system_admission-controller-ghi_u7/admission-controller/0.log": "a0",
			},
			want: []string{
				"aware-system_admission-controller-ghi_u7/admission-controller/0.log",
				"aware-system_recommender-abc_u1/recommender/0.log",
				"aware-system_recommender-abc_u1/recommender/1.log",
				"aware-system_updater-def_u2/updater/0.log",
				"aware-system_updater-def_u2/updater/0.log.20261201-030000",
			},
		},
		{name: "no pods in the namespace", files: map[string]string{"default_p_u/c/0.log": "x"}},
		{name: "no pod-logs directory", noDir: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodeDir, dst := t.TempDir(), filepath.Join(t.TempDir(), "components")
			if !tc.noDir {
				if err := os.MkdirAll(filepath.Join(nodeDir, "pod-logs"), 0o755); err != nil {
					t.Fatal(err)
				}
				write(t, filepath.Join(nodeDir, "pod-logs"), tc.files)
			}
			n, err := Env{NodeDir: nodeDir}.KeepPodLogs(Namespace, dst)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			got := list(t, dst)
			names := make([]string, 0, len(got))
			for name, body := range got {
				names = append(names, name)
				if body != tc.files[name] {
					t.Errorf("%s holds %q, want %q", name, body, tc.files[name])
				}
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.want) || n != len(tc.want) {
				t.Errorf("copied %d: %v, want %v", n, names, tc.want)
			}
		})
	}
}

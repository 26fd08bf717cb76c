//go:build e2e

package e2e

// The upgrade fixture: what TestRecordUpgradeFixture (upgrade_record_test.go,
// run by hack/upgrade-fixture.sh in a checkout of the version recorded)
// writes into e2e/testdata/upgrade/<version>/, and TestUpgrade
// (upgrade_test.go) installs under the current tree. This file is copied
// into that checkout with the recorder, so it must build in both trees: it
// uses nothing but the standard library and the framework's Testbed.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aware-k8s/aware/e2e/framework"
)

// upgradeFixtureManifest is manifest.json of a fixture.
type upgradeFixtureManifest struct {
	// Version is the release the fixture stands for, Commit the commit its
	// components were built from, Recorded when.
	Version  string    `json:"version"`
	Commit   string    `json:"commit"`
	Recorded time.Time `json:"recorded"`
	// Namespace held the workloads; the objects are restored into it.
	Namespace string `json:"namespace"`
	// AgentArgs are the rl-agent flags it ran with that its state depends
	// on (the action space): an upgrade keeps them, as the install does.
	AgentArgs []string `json:"agentArgs"`
	// Objects are the custom resources as etcd stored them: Key is their
	// etcd key, File the stored value under objects/.
	Objects []upgradeFixtureObject `json:"objects"`
	// Workloads are the autoscalers and what the agent said of each when
	// recorded, after the last checkpoint.
	Workloads []upgradeFixtureWorkload `json:"workloads"`
	// StateFiles are the files of the agent's state directory, copied
	// into state/ after the agent stopped.
	StateFiles []string `json:"stateFiles"`
}

type upgradeFixtureObject struct {
	Key  string `json:"key"`
	File string `json:"file"`
}

type upgradeFixtureWorkload struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
	// Stage, Episodes, Transitions and PolicyVersion are the agent's
	// GetPolicyStatus; Source and Reason the MPA's status.rl.
	Stage         string `json:"stage"`
	Episodes      int64  `json:"episodes"`
	Transitions   int64  `json:"transitions"`
	PolicyVersion string `json:"policyVersion"`
	Source        string `json:"source"`
	Reason        string `json:"reason"`
	// Checkpoints are the names of its MultidimPodAutoscalerCheckpoints.
	Checkpoints []string `json:"checkpoints"`
}

// upgradeFixtureDir holds one fixture per recorded version.
func upgradeFixtureDir() string { return filepath.Join(repoRoot, "e2e", "testdata", "upgrade") }

func readUpgradeFixture(dir string) (*upgradeFixtureManifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	var m upgradeFixtureManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s/manifest.json: %w", dir, err)
	}
	return &m, nil
}

// etcdURL is the testbed's etcd client URL (up.sh puts it at the base
// port).
func etcdURL(tb *framework.Testbed) (string, error) {
	if u := tb.Env["AWARE_ETCD_URL"]; u != "" {
		return u, nil
	}
	base, err := strconv.Atoi(tb.Env["AWARE_TESTBED_BASE_PORT"])
	if err != nil {
		return "", fmt.Errorf("the testbed env sets neither AWARE_ETCD_URL nor a valid AWARE_TESTBED_BASE_PORT: %w", err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", base), nil
}

// etcdCall posts req to etcd's gRPC gateway (/v3/kv/...), which takes and
// returns bytes as base64, as encoding/json does: no etcd client needed.
func etcdCall(ctx context.Context, url, method string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v3/kv/"+method, bytes.NewReader(body))
	if err != nil {
		return err
	}
	r.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", method, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", method, res.Status, b)
	}
	if resp == nil {
		return nil
	}
	return json.Unmarshal(b, resp)
}

// etcdPut writes value under key, as kube-apiserver would have.
func etcdPut(ctx context.Context, url, key string, value []byte) error {
	return etcdCall(ctx, url, "put", map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte(key)),
		"value": base64.StdEncoding.EncodeToString(value),
	}, nil)
}

//go:build e2e && upgraderecord

package e2e

// What only the recorder reads from etcd (the tier itself only writes).

import (
	"context"
	"encoding/base64"
)

// The custom resources' etcd keys: kube-apiserver's default prefix, then
// group, plural, namespace and name.
const etcdGroupPrefix = "/registry/autoscaling.aware.dev/"

// etcdKV is a key and its value as etcd's JSON gateway returns them.
type etcdKV struct {
	Key   []byte `json:"key"`
	Value []byte `json:"value"`
}

// etcdList returns the keys and values under prefix.
func etcdList(ctx context.Context, url, prefix string) ([]etcdKV, error) {
	end := []byte(prefix)
	end[len(end)-1]++
	var resp struct {
		KVs []etcdKV `json:"kvs"`
	}
	err := etcdCall(ctx, url, "range", map[string]string{
		"key":       base64.StdEncoding.EncodeToString([]byte(prefix)),
		"range_end": base64.StdEncoding.EncodeToString(end),
	}, &resp)
	return resp.KVs, err
}

package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ServiceAccountToken asks the TokenRequest API for a token of the
// ServiceAccount namespace/name, valid for ttl. This is how a component that
// the e2e runs as a local process gets its own identity, so that the RBAC in
// deploy/ is what decides what it may do.
func (tb *Testbed) ServiceAccountToken(ctx context.Context, namespace, name string, ttl time.Duration) (string, error) {
	secs := int64(ttl / time.Second)
	tr, err := tb.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for serviceaccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// EnsureServiceAccount creates namespace/name if it does not exist yet.
func (tb *Testbed) EnsureServiceAccount(ctx context.Context, namespace, name string) error {
	_, err := tb.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// ServiceAccountConfig returns a client config that authenticates as the
// ServiceAccount namespace/name with a fresh token, and trusts only the
// testbed CA.
func (tb *Testbed) ServiceAccountConfig(ctx context.Context, namespace, name string, ttl time.Duration) (*rest.Config, error) {
	token, err := tb.ServiceAccountToken(ctx, namespace, name, ttl)
	if err != nil {
		return nil, err
	}
	cfg := rest.AnonymousClientConfig(tb.Config)
	cfg.BearerToken = token
	cfg.TLSClientConfig = rest.TLSClientConfig{CAFile: tb.CAFile}
	cfg.UserAgent = fmt.Sprintf("aware-e2e/%s/%s", namespace, name)
	return cfg, nil
}

// ServiceAccountClient is ServiceAccountConfig turned into a clientset.
func (tb *Testbed) ServiceAccountClient(ctx context.Context, namespace, name string, ttl time.Duration) (kubernetes.Interface, error) {
	cfg, err := tb.ServiceAccountConfig(ctx, namespace, name, ttl)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// WriteServiceAccountKubeconfig writes a kubeconfig for the ServiceAccount
// namespace/name to path (mode 0600), for a component started as a process
// with --kubeconfig. The token is not refreshed: pick a ttl longer than the
// test (the apiserver here sets no upper bound).
func (tb *Testbed) WriteServiceAccountKubeconfig(ctx context.Context, namespace, name, path string, ttl time.Duration) error {
	token, err := tb.ServiceAccountToken(ctx, namespace, name, ttl)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["aware-testbed"] = &clientcmdapi.Cluster{Server: tb.Config.Host, CertificateAuthority: tb.CAFile}
	user := namespace + "/" + name
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["aware-testbed"] = &clientcmdapi.Context{Cluster: "aware-testbed", AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = "aware-testbed"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}

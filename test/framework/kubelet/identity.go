package kubelet

import (
	"context"
	"fmt"
	"path/filepath"

	wfclientset "github.com/argoproj/argo-workflows/v3/pkg/client/clientset/versioned"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// podIdentity is who a pod's process and its task result report act as.
type podIdentity struct {
	kubeconfig string                // for the process's KUBECONFIG
	wf         wfclientset.Interface // for the WorkflowTaskResult
}

// identity returns the rig's identity (Options.Kubeconfig, the stand-in's
// client), or with Options.AsServiceAccount a token of the pod's service
// account, as in a real cluster: the step's RBAC and the executor's
// (workflowtaskresults create/patch) are then enforced.
func (k *Kubelet) identity(ctx context.Context, pod *corev1.Pod, dir string) (*podIdentity, error) {
	if !k.opts.AsServiceAccount {
		return &podIdentity{kubeconfig: k.opts.Kubeconfig, wf: k.wf}, nil
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	expiry := int64(3600)
	tr, err := k.kube.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &expiry,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for service account %s: %w", sa, err)
	}
	cfg := rest.AnonymousClientConfig(k.opts.Config)
	cfg.BearerToken = tr.Status.Token
	wf, err := wfclientset.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["rig"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["rig"] = &clientcmdapi.Context{Cluster: "rig", AuthInfo: sa, Namespace: pod.Namespace}
	kc.CurrentContext = "rig"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return nil, err
	}
	return &podIdentity{kubeconfig: path, wf: wf}, nil
}

"""The Kubernetes twin: the rendered Kubernetes manifests applied to a real control plane.

``etcd``, ``kube-apiserver``, ``kube-controller-manager`` and ``kube-scheduler`` at one pinned
Kubernetes release, built from their Go modules (`build`, cached outside the checkout by
version), run on loopback with generated certificates (`pki`, `control_plane`); the CRDs of
the controllers railplan renders for, taken from those projects' own Go modules (`crds`);
and the rendered ``files/k8s/`` tree applied in its README's order with ``kubectl apply
--server-side`` (`apply`). ``python -m tests.k8s_twin`` drives it by hand; the pytest module
``tests/test_k8s_twin.py`` runs it. Go is only the build tool of this test set-up.
"""

package controllers

import (
	"fmt"
	"os"

	"github.com/minictl/minictl/auth/pki"
	sa "github.com/minictl/minictl/auth/serviceaccount"
	"github.com/minictl/minictl/controllers/bootstrapsigner"
	"github.com/minictl/minictl/controllers/clusterroleaggregation"
	"github.com/minictl/minictl/controllers/cronjob"
	"github.com/minictl/minictl/controllers/csrapproving"
	"github.com/minictl/minictl/controllers/csrcleaner"
	"github.com/minictl/minictl/controllers/csrsigning"
	"github.com/minictl/minictl/controllers/daemonset"
	"github.com/minictl/minictl/controllers/deployment"
	"github.com/minictl/minictl/controllers/disruption"
	"github.com/minictl/minictl/controllers/endpoints"
	"github.com/minictl/minictl/controllers/endpointslice"
	"github.com/minictl/minictl/controllers/endpointslicemirroring"
	"github.com/minictl/minictl/controllers/garbagecollector"
	"github.com/minictl/minictl/controllers/job"
	"github.com/minictl/minictl/controllers/namespace"
	"github.com/minictl/minictl/controllers/nodeipam"
	"github.com/minictl/minictl/controllers/nodelifecycle"
	"github.com/minictl/minictl/controllers/persistentvolume"
	"github.com/minictl/minictl/controllers/podautoscaler"
	"github.com/minictl/minictl/controllers/podgc"
	"github.com/minictl/minictl/controllers/pvcprotection"
	"github.com/minictl/minictl/controllers/pvprotection"
	"github.com/minictl/minictl/controllers/replicaset"
	"github.com/minictl/minictl/controllers/replicationcontroller"
	"github.com/minictl/minictl/controllers/resourcequota"
	"github.com/minictl/minictl/controllers/rootcacertpublisher"
	"github.com/minictl/minictl/controllers/serviceaccount"
	"github.com/minictl/minictl/controllers/serviceaccounttoken"
	"github.com/minictl/minictl/controllers/statefulset"
	"github.com/minictl/minictl/controllers/tokencleaner"
	"github.com/minictl/minictl/controllers/ttlafterfinished"
)

// knownControllers is the manager's table: every controller it can run,
// wired explicitly to what it needs. Names and defaults follow
// kube-controller-manager's --controllers.
var knownControllers = []descriptor{
	{
		name: podautoscaler.Name, serviceAccount: "horizontal-pod-autoscaler", defaultOn: true, workers: 5, workersFlag: "concurrent-horizontal-pod-autoscaler-syncs",
		component: "horizontal-pod-autoscaler",
		build: func(cc *controllerContext) (runner, error) {
			t := cc.Timings
			return podautoscaler.New(podautoscaler.Options{Common: cc.Common, SyncPeriod: t.HPASyncPeriod, Tolerance: t.HPATolerance,
				DownscaleStabilization: t.HPADownscaleStabilization, CPUInitializationPeriod: t.HPACPUInitializationPeriod,
				InitialReadinessDelay: t.HPAInitialReadinessDelay})
		},
	},
	{
		name: replicaset.Name, serviceAccount: "replicaset-controller", defaultOn: true, workers: 5, workersFlag: "concurrent-replicaset-syncs",
		build: func(cc *controllerContext) (runner, error) {
			return replicaset.New(replicaset.Options{Common: cc.Common})
		},
	},
	{
		name: replicationcontroller.Name, serviceAccount: "replication-controller", defaultOn: true, workers: 5, workersFlag: "concurrent-rc-syncs",
		component: "replication-controller",
		build: func(cc *controllerContext) (runner, error) {
			return replicationcontroller.New(replicationcontroller.Options{Common: cc.Common})
		},
	},
	{
		name: deployment.Name, serviceAccount: "deployment-controller", defaultOn: true, workers: 5, workersFlag: "concurrent-deployment-syncs",
		build: func(cc *controllerContext) (runner, error) {
			return deployment.New(deployment.Options{Common: cc.Common})
		},
	},
	{
		// kube-controller-manager runs one worker and has no flag for it.
		name: disruption.Name, serviceAccount: "disruption-controller", defaultOn: true, workers: 1,
		build: func(cc *controllerContext) (runner, error) {
			return disruption.New(disruption.Options{Common: cc.Common})
		},
	},
	{
		name: cronjob.Name, serviceAccount: "cronjob-controller", defaultOn: true, workers: 5, workersFlag: "concurrent-cron-job-syncs",
		build: func(cc *controllerContext) (runner, error) {
			return cronjob.New(cronjob.Options{Common: cc.Common})
		},
	},
	{
		name: daemonset.Name, serviceAccount: "daemon-set-controller", defaultOn: true, workers: 2, workersFlag: "concurrent-daemonset-syncs",
		build: func(cc *controllerContext) (runner, error) {
			return daemonset.New(daemonset.Options{Common: cc.Common})
		},
	},
	{
		name: statefulset.Name, serviceAccount: "statefulset-controller", defaultOn: true, workers: 5, workersFlag: "concurrent-statefulset-syncs",
		build: func(cc *controllerContext) (runner, error) {
			return statefulset.New(statefulset.Options{Common: cc.Common})
		},
	},
	{
		name: garbagecollector.Name, serviceAccount: "generic-garbage-collector", defaultOn: true, workers: 20, workersFlag: "concurrent-gc-syncs",
		build: func(cc *controllerContext) (runner, error) {
			return garbagecollector.New(garbagecollector.Options{Common: cc.Common})
		},
	},
	{
		name: serviceaccount.Name, serviceAccount: "service-account-controller", defaultOn: true, workers: 1, workersFlag: "concurrent-serviceaccount-syncs",
		build: func(cc *controllerContext) (runner, error) {
			return serviceaccount.New(serviceaccount.Options{Common: cc.Common})
		},
	},
	{
		// kube-controller-manager runs it with one worker and no flag,
		// on its own credentials: the other controllers' tokens come
		// from it.
		name: serviceaccounttoken.Name, defaultOn: true, workers: 1,
		build: func(cc *controllerContext) (runner, error) {
			file := cc.Credentials.ServiceAccountPrivateKeyFile
			if file == "" {
				return disabled(cc, serviceaccounttoken.Name, "there is no private key (--service-account-private-key-file)")
			}
			key, err := sa.ReadPrivateKey(file)
			if err != nil {
				return nil, fmt.Errorf("--service-account-private-key-file: %w", err)
			}
			signer, err := sa.NewSigner(key)
			if err != nil {
				return nil, err
			}
			rootCA, err := readRootCA(cc.Credentials.RootCAFile)
			if err != nil {
				return nil, err
			}
			return serviceaccounttoken.New(serviceaccounttoken.Options{Common: cc.Common, Signer: signer, RootCA: rootCA})
		},
	},
	{
		name: rootcacertpublisher.Name, serviceAccount: "root-ca-cert-publisher", defaultOn: true, workers: 1,
		build: func(cc *controllerContext) (runner, error) {
			rootCA, err := readRootCA(cc.Credentials.RootCAFile)
			if err != nil {
				return nil, err
			}
			if len(rootCA) == 0 {
				return disabled(cc, rootcacertpublisher.Name, "there is no root CA (--root-ca-file)")
			}
			return rootcacertpublisher.New(rootcacertpublisher.Options{Common: cc.Common, RootCA: rootCA})
		},
	},
	{
		name: podgc.Name, serviceAccount: "pod-garbage-collector", defaultOn: true, workers: 5,
		build: func(cc *controllerContext) (runner, error) {
			return podgc.New(podgc.Options{
				Common:                 cc.Common,
				TerminatedPodThreshold: cc.Timings.TerminatedPodGCThreshold,
				Period:                 cc.Timings.PodGCPeriod,
				QuarantineTime:         cc.Timings.PodGCQuarantine,
			})
		},
	},
	{
		name: namespace.Name, serviceAccount: "namespace-controller", defaultOn: true, workers: 10, workersFlag: "concurrent-namespace-syncs",
		build: func(cc *controllerContext) (runner, error) {
			return namespace.New(namespace.Options{Common: cc.Common})
		},
	},
	{
		name: endpoints.Name, serviceAccount: "endpoint-controller", defaultOn: true, workers: 5, workersFlag: "concurrent-endpoint-syncs",
		build: func(cc *controllerContext) (runner, error) {
			return endpoints.New(endpoints.Options{Common: cc.Common})
		},
	},
	{
		// kube-controller-manager runs each of the volume controllers
		// with one worker and no flag for it. The binder here has a few:
		// binding a claim is three writes in a row, and one worker binds
		// the claims of a 100-pod StatefulSet at a few a second once
		// writes slow down on a busy machine. Two claims after one volume
		// cannot both have it: the loser's write of the volume conflicts.
		name: persistentvolume.Name, serviceAccount: "persistent-volume-binder", defaultOn: true, workers: 5,
		component: "persistentvolume-controller",
		build: func(cc *controllerContext) (runner, error) {
			return persistentvolume.New(persistentvolume.Options{Common: cc.Common, SyncPeriod: cc.Timings.PVClaimBinderSyncPeriod})
		},
	},
	{
		name: pvcprotection.Name, serviceAccount: "pvc-protection-controller", defaultOn: true, workers: 1,
		build: func(cc *controllerContext) (runner, error) {
			return pvcprotection.New(pvcprotection.Options{Common: cc.Common})
		},
	},
	{
		name: pvprotection.Name, serviceAccount: "pv-protection-controller", defaultOn: true, workers: 1,
		build: func(cc *controllerContext) (runner, error) {
			return pvprotection.New(pvprotection.Options{Common: cc.Common})
		},
	},
	{
		name: endpointslice.Name, serviceAccount: "endpointslice-controller", defaultOn: true, workers: 5, workersFlag: "concurrent-service-endpoint-syncs",
		component: "endpoint-slice-controller",
		build: func(cc *controllerContext) (runner, error) {
			return endpointslice.New(endpointslice.Options{
				Common:               cc.Common,
				MaxEndpointsPerSlice: cc.Timings.MaxEndpointsPerSlice, EndpointUpdatesBatchPeriod: cc.Timings.EndpointUpdatesBatchPeriod,
			})
		},
	},
	{
		name: endpointslicemirroring.Name, serviceAccount: "endpointslicemirroring-controller", defaultOn: true, workers: 5, workersFlag: "mirroring-concurrent-service-endpoint-syncs",
		component: "endpoint-slice-mirroring-controller",
		build: func(cc *controllerContext) (runner, error) {
			return endpointslicemirroring.New(endpointslicemirroring.Options{
				Common:                cc.Common,
				MaxEndpointsPerSubset: cc.Timings.MirroringMaxEndpointsPerSubset, UpdatesBatchPeriod: cc.Timings.MirroringEndpointUpdatesBatchPeriod,
			})
		},
	},
	{
		name: resourcequota.Name, serviceAccount: "resourcequota-controller", defaultOn: true, workers: 5, workersFlag: "concurrent-resource-quota-syncs",
		build: func(cc *controllerContext) (runner, error) {
			return resourcequota.New(resourcequota.Options{
				Common: cc.Common, ResyncPeriod: cc.Timings.ResourceQuotaSyncPeriod,
			})
		},
	},
	{
		name: nodelifecycle.Name, serviceAccount: "node-controller", defaultOn: true, workers: 1,
		build: func(cc *controllerContext) (runner, error) {
			t := cc.Timings
			return nodelifecycle.New(nodelifecycle.Options{
				Common:            cc.Common,
				NodeMonitorPeriod: t.NodeMonitorPeriod, NodeMonitorGracePeriod: t.NodeMonitorGracePeriod,
				NodeStartupGracePeriod: t.NodeStartupGracePeriod,
				EvictionRate:           float32(t.NodeEvictionRate), SecondaryEvictionRate: float32(t.SecondaryNodeEvictionRate),
				UnhealthyZoneThreshold: float32(t.UnhealthyZoneThreshold), LargeClusterSizeThreshold: t.LargeClusterSizeThreshold,
			})
		},
	},
	{
		name: nodeipam.Name, serviceAccount: "node-controller", defaultOn: true, workers: 1,
		build: func(cc *controllerContext) (runner, error) {
			return nodeipam.New(nodeipam.Options{
				Common:      cc.Common,
				ClusterCIDR: cc.Timings.ClusterCIDR, NodeCIDRMaskSize: cc.Timings.NodeCIDRMaskSize,
			})
		},
	},
	{
		name: job.Name, serviceAccount: "job-controller", defaultOn: true, workers: 5, workersFlag: "concurrent-job-syncs",
		build: func(cc *controllerContext) (runner, error) {
			return job.New(job.Options{
				Common:      cc.Common,
				BackoffBase: cc.Timings.JobBackoffBase, BackoffMax: cc.Timings.JobBackoffMax,
			})
		},
	},
	{
		name: ttlafterfinished.Name, serviceAccount: "ttl-after-finished-controller", defaultOn: true, workers: 5, workersFlag: "concurrent-ttl-after-finished-syncs",
		build: func(cc *controllerContext) (runner, error) {
			return ttlafterfinished.New(ttlafterfinished.Options{Common: cc.Common})
		},
	},
	{
		// kube-controller-manager runs it with five workers and no flag.
		name: clusterroleaggregation.Name, serviceAccount: "clusterrole-aggregation-controller", defaultOn: true, workers: 5,
		build: func(cc *controllerContext) (runner, error) {
			return clusterroleaggregation.New(clusterroleaggregation.Options{Common: cc.Common})
		},
	},
	{
		// kube-controller-manager's csrsigning has no workers flag; it
		// runs without a CA only as a no-op, which says so.
		name: csrsigning.Name, serviceAccount: "certificate-controller", defaultOn: true, workers: 5,
		build: func(cc *controllerContext) (runner, error) {
			sg := cc.Signing
			if sg.CertFile == "" || sg.KeyFile == "" {
				return disabled(cc, csrsigning.Name, "no csr cert/key was specified (--cluster-signing-cert-file, --cluster-signing-key-file)")
			}
			ca, err := pki.LoadCA(sg.CertFile, sg.KeyFile)
			if err != nil {
				return nil, err
			}
			return csrsigning.New(csrsigning.Options{Common: cc.Common, CA: ca, Duration: sg.Duration})
		},
	},
	{
		name: csrapproving.Name, serviceAccount: "certificate-controller", defaultOn: true, workers: 5,
		build: func(cc *controllerContext) (runner, error) {
			return csrapproving.New(csrapproving.Options{Common: cc.Common})
		},
	},
	{
		name: csrcleaner.Name, serviceAccount: "certificate-controller", defaultOn: true, workers: 1,
		build: func(cc *controllerContext) (runner, error) {
			return csrcleaner.New(csrcleaner.Options{Common: cc.Common})
		},
	},
	{
		// Off by default, as in kube-controller-manager, whose default
		// --controllers is "*" and which kubeadm runs with
		// "*,bootstrapsigner,tokencleaner".
		name: bootstrapsigner.Name, serviceAccount: "bootstrap-signer", defaultOn: false, workers: 1,
		build: func(cc *controllerContext) (runner, error) {
			return bootstrapsigner.New(bootstrapsigner.Options{Common: cc.Common})
		},
	},
	{
		name: tokencleaner.Name, serviceAccount: "token-cleaner", defaultOn: false, workers: 1,
		build: func(cc *controllerContext) (runner, error) {
			return tokencleaner.New(tokencleaner.Options{Common: cc.Common})
		},
	},
}

// disabled stands for a controller that lacks what it needs to run, as
// kube-controller-manager skips one: it says why, once, and the manager
// runs nothing in its place (a nil runner).
func disabled(cc *controllerContext, name, reason string) (runner, error) {
	cc.Logger.Warn(name + " is disabled because " + reason)
	return nil, nil
}

// readRootCA reads --root-ca-file; "" is none.
func readRootCA(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--root-ca-file: %w", err)
	}
	return data, nil
}

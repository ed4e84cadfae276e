package controllers

import (
	"github.com/minictl/minictl/controllers/deployment"
	"github.com/minictl/minictl/controllers/replicaset"
)

// knownControllers is the manager's table: every controller it can run,
// wired explicitly to what it needs. Names and defaults follow
// kube-controller-manager's --controllers.
var knownControllers = []descriptor{
	{
		name: "replicaset", defaultOn: true, workers: 5, workersFlag: "concurrent-replicaset-syncs",
		build: func(cc *controllerContext) (runner, error) {
			return replicaset.New(replicaset.Options{
				Client: cc.Client, Informers: cc.Informers, Recorder: cc.Recorder,
				Logger: cc.Logger, MetricsRegisterer: cc.Metrics,
			})
		},
	},
	{
		name: "deployment", defaultOn: true, workers: 5, workersFlag: "concurrent-deployment-syncs",
		build: func(cc *controllerContext) (runner, error) {
			return deployment.New(deployment.Options{
				Client: cc.Client, Informers: cc.Informers, Recorder: cc.Recorder,
				Logger: cc.Logger, MetricsRegisterer: cc.Metrics,
			})
		},
	},
}

// Package gctune bounds the garbage collector's headroom at large heaps.
//
// Go's collector lets the heap grow by GOGC percent of what the last
// collection found live before it collects again. minictl runs at
// GOGC=200: a small control plane allocates fast while little of it stays,
// and collecting less often saves CPU for the memory of two more live
// heaps. That trade is proportional, and at scale it stops being a good
// one: with a gigabyte of pods live, GOGC=200 keeps two more gigabytes
// for garbage, and the runtime keeps what the heap reached.
//
// Run caps the headroom instead: once GOGC would keep more than CapFrom
// for garbage (a live heap of 256 MB at GOGC=200), it sets Go's soft
// memory limit to the memory the runtime holds after a collection plus
// MaxHeadroom, or a quarter of the live heap when that is larger. The
// collector then runs when the heap has grown by the headroom, and the
// runtime returns to the system what lies above the limit. Below that
// size, which covers make bench and every lesson, there is no limit and
// GOGC alone paces the collector, as before. The limit is recomputed after every
// collection, so it follows the live heap up and down; a heap that grows
// past it only makes the collector run sooner (the runtime bounds the
// CPU the limit may cost), never fails an allocation.
package gctune

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// CapFrom is the most memory GOGC may keep for garbage before the
// headroom is capped.
const CapFrom = 512 << 20

// MaxHeadroom is the most memory kept for garbage between collections,
// once capped, while a quarter of the live heap is less. At 15,000 pods
// (300 MB live) it took the steady RSS from 1.6 to 1.0 GB, with the pods'
// creation at 100 per second and its latencies unchanged; 512 MB before.
const MaxHeadroom = 128 << 20

// interval is how often Run looks for a finished collection.
const interval = time.Second

// Limit is the soft memory limit Run sets for a process whose last
// collection found live bytes live and left it holding held bytes (heap
// spans in use, stacks and the runtime's own structures; not memory it
// has freed): no limit (math.MaxInt64) while GOGC keeps no more than
// capFrom for garbage, else held plus maxHeadroom or a quarter of live,
// whichever is larger.
func Limit(live, held uint64, gogc int, capFrom, maxHeadroom uint64) int64 {
	if gogc < 0 || live/100*uint64(gogc) <= capFrom {
		return math.MaxInt64
	}
	return int64(min(held+max(maxHeadroom, live/4), math.MaxInt64))
}

// Run keeps the memory limit as Limit says, with capFrom and maxHeadroom,
// until ctx ends, then removes it. gogc is the collector's GOGC. The limit
// is then Run's alone: call it only when GOMEMLIMIT is not set.
func Run(ctx context.Context, gogc int, capFrom, maxHeadroom uint64) {
	samples := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	defer debug.SetMemoryLimit(math.MaxInt64)
	var cycles uint64
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(samples)
		if n := samples[0].Value.Uint64(); n == cycles {
			continue
		} else {
			cycles = n
		}
		live := samples[1].Value.Uint64()
		held := samples[2].Value.Uint64() - samples[3].Value.Uint64() - samples[4].Value.Uint64()
		debug.SetMemoryLimit(Limit(live, held, gogc, capFrom, maxHeadroom))
	}
}

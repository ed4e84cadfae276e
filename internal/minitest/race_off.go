//go:build !race

package minitest

// RaceBuilt: this test binary runs without the race detector, and so does
// the minictl it builds.
const RaceBuilt = false

//go:build race

package minitest

// RaceBuilt: this test binary runs with the race detector, and so does
// the minictl it builds.
const RaceBuilt = true

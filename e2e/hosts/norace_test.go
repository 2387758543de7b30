//go:build !race

package hosts

const raceEnabled = false

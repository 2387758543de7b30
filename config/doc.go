// Package config loads the runtime's configuration: one YAML file with a
// section per component, using the keys and defaults of the reference tools.
// Every value is checked when the file is loaded, and an error names the key,
// the value, its line and the rule it breaks; every problem of a file is
// reported at once (unknown keys, wrong types and values out of range). With
// no file at all, Default applies.
//
// Example file:
//
//	bash:
//	  timeoutMs: 60000
//	  maxOutputChars: 32000
//	terminal:
//	  enableRunInBackground: false
//
// Keys that are left out keep their defaults; unknown keys are errors, so a
// misspelt key is reported instead of silently ignored.
package config

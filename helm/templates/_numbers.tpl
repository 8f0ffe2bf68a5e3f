{{/*
Integers as the chart prints them. Helm reads every YAML number as a float64, and Go prints a
float64 of a million or more in scientific notation (`1e+06`, `4.261328e+06`):
https://github.com/helm/helm/issues/1707 and https://github.com/helm/helm/issues/6431. An integer
given with --set is an int64, but the chart re-reads the values through fromJson on the way
(pd-stack.pools, the connector helpers), which makes it a float64 again. So
every integer the chart prints (a flag's value, an env value, a YAML scalar) goes through
pd-stack.int where it is printed, never toString or a bare {{ }}: (dict "key" <its values path,
for the message> "value" <the number>). It prints plain digits for a whole float64, an int or an
int64, and a string of digits (the keys that take a number or a string) as it is. Anything else,
or an integer beyond 2^53 - 1 (the largest a float64 holds exactly: Helm has already rounded one
above it, so its digits would not be the user's), fails the render naming the key; the schema
refuses both first, so this is the last guard, for a render that skips the schema. Numbers inside
objects the chart writes whole with toYaml or toJson need nothing: Go's JSON encoder writes a whole
float64 below 1e21 as digits.
*/}}
{{- define "pd-stack.int" -}}
{{- $value := .value -}}
{{- $digits := "" -}}
{{- if kindIs "float64" $value -}}
{{- if and (eq (floor $value) $value) (le $value 9007199254740991.0) (ge $value -9007199254740991.0) -}}{{- $digits = printf "%.0f" $value -}}{{- end -}}
{{- else if or (kindIs "int" $value) (kindIs "int64" $value) -}}
{{- if and (le (int64 $value) 9007199254740991) (ge (int64 $value) -9007199254740991) -}}{{- $digits = printf "%d" $value -}}{{- end -}}
{{- else if and (kindIs "string" $value) (regexMatch "^-?[0-9]+$" ($value | default "")) -}}
{{- $digits = $value -}}
{{- end -}}
{{- if not $digits -}}
{{- fail (printf "%s: %v is not an integer from -9007199254740991 to 9007199254740991 (2^53 - 1, the largest integer Helm holds exactly)" .key $value) -}}
{{- end -}}
{{- $digits -}}
{{- end -}}

{{/*
A value of a key that takes any number (or a string, for some): a whole float64 within 2^53 - 1
prints as digits (10000000, not 1e+07, for the same reason as pd-stack.int); a fraction, a string
or a bool prints as toString has it (0.85, 5Gi, true). For env values and Kubernetes quantities,
which their readers parse as written.
*/}}
{{- define "pd-stack.number" -}}
{{- if and (kindIs "float64" .) (eq (floor .) .) (le . 9007199254740991.0) (ge . -9007199254740991.0) -}}
{{- printf "%.0f" . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

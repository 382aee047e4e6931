{{/*
Named templates. The ones an application's chart uses, with the relay chart as a dependency
and relay.mode=sidecar, all take the relay subchart's scope, `.Subcharts.relay`:

  relay.sidecar                          the relay container (a list item)
  relay.sidecarVolumes                   its buffer volume (a list item)
  relay.terminationGracePeriodSeconds    the relay's share of the pod's grace period
  relay.secretChecksum                   a pod annotation value that rolls pods on key changes

See README.md of this chart and helm/examples/app-with-sidecar.
*/}}

{{- define "relay.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "relay.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "relay.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "relay.selectorLabels" -}}
app.kubernetes.io/name: {{ include "relay.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "relay.labels" -}}
helm.sh/chart: {{ include "relay.chart" . }}
{{ include "relay.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ .Values.mode }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "relay.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The relay's own mode setting: a sidecar is a relay. */}}
{{- define "relay.serviceMode" -}}
{{- if eq .Values.mode "standalone" }}standalone{{ else }}relay{{ end }}
{{- end }}

{{- define "relay.port" -}}
{{- if .Values.port }}{{ .Values.port | int }}
{{- else if eq .Values.mode "standalone" }}4242
{{- else }}3063
{{- end }}
{{- end }}

{{- define "relay.secretName" -}}
{{- default (include "relay.fullname" .) .Values.existingSecret }}
{{- end }}

{{/* The Secret's contents when the chart makes it: variable name -> comma-separated keys. */}}
{{- define "relay.secretData" -}}
{{- $data := dict }}
{{- if eq .Values.mode "standalone" }}
{{- with .Values.tokens.initAdmin }}{{ $_ := set $data "RELAY_INIT_ADMIN_API_TOKENS" (join "," .) }}{{ end }}
{{- with .Values.tokens.initClient }}{{ $_ := set $data "RELAY_INIT_CLIENT_API_TOKENS" (join "," .) }}{{ end }}
{{- with .Values.database.url }}{{ $_ := set $data "RELAY_DATABASE_URL" . }}{{ end }}
{{- else }}
{{- with .Values.tokens.upstream }}{{ $_ := set $data "RELAY_UPSTREAM_TOKENS" (join "," .) }}{{ end }}
{{- with .Values.tokens.client }}{{ $_ := set $data "RELAY_CLIENT_TOKENS" (join "," .) }}{{ end }}
{{- end }}
{{- toJson $data }}
{{- end }}

{{- define "relay.secretChecksum" -}}
{{- printf "%s/%s" (include "relay.secretName" .) (include "relay.secretData" .) | sha256sum }}
{{- end }}

{{/* A value as the relay reads it from its environment: integers without an exponent. */}}
{{- define "relay.envValue" -}}
{{- if kindIs "float64" . }}
{{- if eq . (floor .) }}{{ printf "%d" (int64 .) }}{{ else }}{{ . }}{{ end }}
{{- else if kindIs "slice" . }}
{{- join "," . }}
{{- else }}
{{- . }}
{{- end }}
{{- end }}

{{/* A setting from .Values.config, or the relay's default when it is not given. */}}
{{- define "relay.seconds" -}}
{{- $value := index .root.Values.config .name }}
{{- if kindIs "invalid" $value }}{{ .default }}{{ else }}{{ $value }}{{ end }}
{{- end }}

{{/* Longest a stop may take: preStop sleep, in-flight requests, then the final flush. */}}
{{- define "relay.stopSeconds" -}}
{{- $shutdown := include "relay.seconds" (dict "root" . "name" "shutdown_timeout" "default" 10) | float64 }}
{{- $flush := include "relay.seconds" (dict "root" . "name" "final_flush_timeout" "default" 10) | float64 }}
{{- addf $shutdown $flush (.Values.preStopSleepSeconds | default 0) }}
{{- end }}

{{- define "relay.terminationGracePeriodSeconds" -}}
{{- $needed := include "relay.stopSeconds" . | float64 }}
{{- $grace := .Values.terminationGracePeriodSeconds }}
{{- if kindIs "invalid" $grace }}
{{- add (ceil $needed | int64) 10 }}
{{- else if le (float64 $grace) $needed }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must be longer than shutdown_timeout + final_flush_timeout + preStopSleepSeconds (%v), or the final flush is killed" $grace $needed) }}
{{- else }}
{{- $grace | int64 }}
{{- end }}
{{- end }}

{{/* "true" when the standalone service keeps its data in PostgreSQL (URL in the Secret). */}}
{{- define "relay.postgres" -}}
{{- if and (eq .Values.mode "standalone") (or .Values.database.url .Values.database.urlInExistingSecret) }}true{{ end }}
{{- end }}

{{/* A claimed volume for the data dir: SQLite store or relay buffer, never for PostgreSQL. */}}
{{- define "relay.persistent" -}}
{{- if and (ne .Values.mode "sidecar") .Values.persistence.enabled (not (include "relay.postgres" .)) }}true{{ end }}
{{- end }}

{{/* Rules between values that values.schema.json does not express. */}}
{{- define "relay.validate" -}}
{{- $replicas := .Values.replicaCount | int }}
{{- if and (eq .Values.mode "standalone") (gt $replicas 1) (not .Values.config.database_url) (not (include "relay.postgres" .)) }}
{{- fail "standalone keeps its data in one SQLite file: replicaCount > 1 needs PostgreSQL (database.url or database.urlInExistingSecret)" }}
{{- end }}
{{- if and (include "relay.persistent" .) (gt $replicas 1) (not (has "ReadWriteMany" .Values.persistence.accessModes)) }}
{{- fail (printf "persistence.accessModes %v cannot be shared by %d replicas: use replicaCount 1, ReadWriteMany, or persistence.enabled=false (relay)" .Values.persistence.accessModes $replicas) }}
{{- end }}
{{- $_ := include "relay.terminationGracePeriodSeconds" . }}
{{- end }}

{{- define "relay.env" -}}
{{- $secret := include "relay.secretName" . -}}
- name: RELAY_MODE
  value: {{ include "relay.serviceMode" . | quote }}
- name: RELAY_PORT
  value: {{ include "relay.port" . | quote }}
- name: RELAY_DATA_DIR
  value: /data
- name: TMPDIR
  value: /data
{{- if ne .Values.mode "standalone" }}
- name: RELAY_UPSTREAM_URL
  value: {{ .Values.upstream.url | quote }}
- name: RELAY_INSTANCE_ID
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end }}
{{- range $name, $value := .Values.config }}
{{- if not (kindIs "invalid" $value) }}
- name: {{ printf "RELAY_%s" (upper $name) }}
  value: {{ include "relay.envValue" $value | quote }}
{{- end }}
{{- end }}
{{- $keys := list "RELAY_UPSTREAM_TOKENS" "RELAY_CLIENT_TOKENS" }}
{{- if eq .Values.mode "standalone" }}
{{- $keys = list "RELAY_INIT_ADMIN_API_TOKENS" "RELAY_INIT_CLIENT_API_TOKENS" }}
{{- if include "relay.postgres" . }}
{{- $keys = append $keys "RELAY_DATABASE_URL" }}
{{- end }}
{{- end }}
{{- range $keys }}
- name: {{ . }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ . }}
      optional: {{ not (has . (list "RELAY_UPSTREAM_TOKENS" "RELAY_DATABASE_URL")) }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The relay container. Context: dict "root" (the chart's scope), "name", "portName", "volume",
"native" (true: a native sidecar, restartPolicy Always).
*/}}
{{- define "relay.container" -}}
{{- $root := .root }}
{{- $values := $root.Values -}}
- name: {{ .name }}
  image: {{ include "relay.image" $root | quote }}
  imagePullPolicy: {{ $values.image.pullPolicy }}
  {{- if .native }}
  restartPolicy: Always
  {{- end }}
  ports:
    - name: {{ .portName }}
      containerPort: {{ include "relay.port" $root }}
      protocol: TCP
  env:
    {{- include "relay.env" $root | nindent 4 }}
  startupProbe:
    httpGet:
      path: /ready
      port: {{ .portName }}
    {{- toYaml $values.probes.startup | nindent 4 }}
  livenessProbe:
    httpGet:
      path: /health
      port: {{ .portName }}
    {{- toYaml $values.probes.liveness | nindent 4 }}
  readinessProbe:
    httpGet:
      path: /ready
      port: {{ .portName }}
    {{- toYaml $values.probes.readiness | nindent 4 }}
  {{- with $values.preStopSleepSeconds }}
  lifecycle:
    preStop:
      sleep:
        seconds: {{ . | int }}
  {{- end }}
  resources:
    {{- toYaml $values.resources | nindent 4 }}
  securityContext:
    runAsNonRoot: true
    runAsUser: {{ $values.securityContext.runAsUser | int }}
    runAsGroup: {{ $values.securityContext.runAsGroup | int }}
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    privileged: false
    capabilities:
      drop:
        - ALL
    seccompProfile:
      type: RuntimeDefault
  volumeMounts:
    - name: {{ .volume }}
      mountPath: /data
{{- end }}

{{- define "relay.emptyDir" -}}
emptyDir:
  {{- with .Values.emptyDir.sizeLimit }}
  sizeLimit: {{ . }}
  {{- else }}
  {}
  {{- end }}
{{- end }}

{{/* For an application's chart: {{ include "relay.sidecar" .Subcharts.relay | nindent 8 }} */}}
{{- define "relay.sidecar" -}}
{{- if ne .Values.mode "sidecar" }}
{{- fail (printf "relay.sidecar needs relay.mode=sidecar (it is %q)" .Values.mode) }}
{{- end }}
{{- include "relay.validate" . }}
{{- include "relay.container" (dict "root" . "name" .Values.sidecar.containerName "portName" "relay" "volume" .Values.sidecar.volumeName "native" .Values.sidecar.native) }}
{{- end }}

{{/* For an application's chart: {{ include "relay.sidecarVolumes" .Subcharts.relay | nindent 8 }} */}}
{{- define "relay.sidecarVolumes" -}}
- name: {{ .Values.sidecar.volumeName }}
  {{- include "relay.emptyDir" . | nindent 2 }}
{{- end }}

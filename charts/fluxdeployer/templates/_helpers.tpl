{{/* The name of the release's objects: fullnameOverride, else the release name, suffixed with the chart's name
unless it contains it. */}}
{{- define "fluxdeployer.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* What the metrics Service and the NetworkPolicy select the pods of every Deployment of the release by. */}}
{{- define "fluxdeployer.selectorLabels" -}}
app.kubernetes.io/name: fluxdeployer
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The recommended labels of every object; app.kubernetes.io/component is added per object. */}}
{{- define "fluxdeployer.labels" -}}
{{ include "fluxdeployer.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: fluxdeployer
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "fluxdeployer.image" -}}
{{- $tag := .Values.image.tag | default (printf "v%s" .Chart.AppVersion) -}}
{{- if .Values.image.digest -}}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "fluxdeployer.priorityClassName" -}}
{{- if .Values.priorityClass.name -}}
{{- .Values.priorityClass.name -}}
{{- else if .Values.priorityClass.create -}}
{{- include "fluxdeployer.fullname" . -}}
{{- end -}}
{{- end -}}

{{/* The args of `fluxdeployer run` for one Deployment: dict root (the chart's context), leaderElection and
selector (optional, set by the chart for shards) besides .Values.allowedRegistries and .Values.flags. */}}
{{- define "fluxdeployer.args" -}}
{{- $v := .root.Values -}}
- run
{{- if .leaderElection }}
- --enable-leader-election
{{- end }}
- --metrics-addr=:8080
- --health-addr=:9440
{{- with .selector }}
- {{ printf "--watch-label-selector=%s" . | quote }}
{{- end }}
{{- with $v.allowedRegistries }}
{{- if hasKey $v.flags "allowed-registries" }}
{{- fail "allowedRegistries and flags.allowed-registries set the same flag: set one" }}
{{- end }}
- {{ printf "--allowed-registries=%s" (join "," .) | quote }}
{{- end }}
{{- range $name, $value := $v.flags }}
{{- if and $.selector (eq $name "watch-label-selector") }}
{{- fail "flags.watch-label-selector cannot be combined with shards: the chart sets each Deployment's selector" }}
{{- end }}
{{- if kindIs "slice" $value }}
- {{ printf "--%s=%s" $name (join "," $value) | quote }}
{{- else if kindIs "float64" $value }}
- {{ printf "--%s=%d" $name (int64 $value) | quote }}
{{- else }}
- {{ printf "--%s=%v" $name $value | quote }}
{{- end }}
{{- end }}
{{- range $v.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* The pod template of one Deployment: dict root, labels (the pod's, selector labels included) and args. */}}
{{- define "fluxdeployer.podTemplate" -}}
{{- $v := .root.Values -}}
metadata:
  labels:
    {{- .labels | nindent 4 }}
    {{- with $v.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $v.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "fluxdeployer.fullname" .root }}
  {{- with include "fluxdeployer.priorityClassName" .root }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with $v.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $v.podSecurityContext | nindent 4 }}
  containers:
    - name: manager
      image: {{ include "fluxdeployer.image" .root }}
      {{- with $v.image.pullPolicy }}
      imagePullPolicy: {{ . }}
      {{- end }}
      args:
        {{- .args | nindent 8 }}
      env:
        # As for Flux's controllers: the namespace of the leader-election Lease and of the ConfigMap.
        - name: RUNTIME_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        # The Go runtime collects garbage harder as the heap nears the container's memory limit.
        - name: GOMEMLIMIT
          valueFrom:
            resourceFieldRef:
              containerName: manager
              resource: limits.memory
      ports:
        - name: http-metrics
          containerPort: 8080
        - name: healthz
          containerPort: 9440
      livenessProbe:
        httpGet:
          path: /healthz
          port: healthz
      readinessProbe:
        httpGet:
          path: /readyz
          port: healthz
      # When the process ends in error (leader election lost, a failed start), the kubelet keeps the tail of its
      # log in the pod's status (lastState.terminated.message), so the reason outlives the container.
      terminationMessagePolicy: FallbackToLogsOnError
      securityContext:
        {{- toYaml $v.securityContext | nindent 8 }}
      resources:
        {{- toYaml $v.resources | nindent 8 }}
{{- end -}}

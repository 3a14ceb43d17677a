"""The GraphQL operations SkyWalking's UI (booster-ui 10.2) sends on page load and in the
trace-profiling view, written for skyprof's tests from the protocol's schema and
shared/spec/skywalking-query-protocol.md (aliases, named operations, variables of scalar, enum,
input-object and list types, as the UI writes them). Each entry: name -> (query, variables)."""

PAGE_LOAD = {
    "queryOAPTimeInfo": ("query queryOAPTimeInfo {\n  getTimeInfo {\n    timezone\n"
                         "    currentTimestamp\n  }\n}", {}),
    "version": ("query version { version }", {}),
    "menuItems": ("query menuItems { getMenuItems { title icon layer activate description "
                  "documentLink i18nKey subItems { title icon layer activate description "
                  "documentLink i18nKey } } }", {}),
    "MetricsTTL": ("query MetricsTTL {getMetricsTTL { minute hour day coldMinute coldHour "
                   "coldDay }}", {}),
    "RecordsTTL": ("query RecordsTTL {getRecordsTTL { normal trace zipkinTrace log "
                   "browserErrorLog coldNormal coldTrace coldZipkinTrace coldLog "
                   "coldBrowserErrorLog }}", {}),
    "hasQueryTracesV2Support": ("query hasQueryTracesV2Support { hasQueryTracesV2Support }", {}),
    "templates": ("query templates {\n    getAllTemplates {\n      id,\n      configuration,\n"
                  "    }\n  }", {}),
    "layers": ("query listLayers {\n    layers: listLayers\n  }", {}),
}


def services(layer):
    return ("query queryServices($layer: String!) {\n  services: listServices(layer: $layer) {\n"
            "    id\n    value: name\n    label: name\n    group\n    layers\n    normal\n"
            "    shortName\n  }\n  }", {"layer": layer})


def service(service_id):
    return ("query queryService($serviceId: String!) {\n  service: getService(serviceId: "
            "$serviceId) {\n    id\n    value: name\n    label: name\n    group\n    layers\n"
            "    normal\n  }\n  }", {"serviceId": service_id})


def instances(service_id, duration):
    return ("query queryInstances($serviceId: ID!, $duration: Duration!) {\n  pods: "
            "listInstances(duration: $duration, serviceId: $serviceId) {\n    id\n    value: "
            "name\n    label: name\n    language\n    instanceUUID\n    attributes {\n      name\n"
            "      value\n    }\n  }\n  }", {"serviceId": service_id, "duration": duration})


def endpoints(service_id, keyword, duration, limit=20):
    return ("query queryEndpoints($serviceId: ID!, $keyword: String!, $duration: Duration, "
            "$limit: Int!) {\n  pods: findEndpoint(serviceId: $serviceId, keyword: $keyword, "
            "limit: $limit, duration: $duration) {\n    id\n    value: name\n     label: name\n"
            "    }\n}", {"serviceId": service_id, "keyword": keyword, "duration": duration,
                         "limit": limit})


def endpoint_info(endpoint_id):
    return ("query queryEndpoint($endpointId: ID!) {\n  endpoint: getEndpointInfo(endpointId: "
            "$endpointId) {\n    id\n    value: name\n    label: name\n    serviceId\n"
            "    serviceName\n  }\n  }", {"endpointId": endpoint_id})


def create_task(request):
    return ("mutation createProfileTask($creationRequest: ProfileTaskCreationRequest) {\n  task: "
            "createProfileTask(creationRequest: $creationRequest) {\n    id\n    errorReason\n"
            "  }\n  }", {"creationRequest": request})


def task_list(service_id, endpoint_name):
    return ("query getProfileTaskList($endpointName: String, $serviceId: ID) {\n  taskList: "
            "getProfileTaskList(endpointName: $endpointName, serviceId: $serviceId) {\n"
            "    serviceId\n    endpointName\n    startTime\n    duration\n"
            "    minDurationThreshold\n    dumpPeriod\n    maxSamplingCount\n    id\n    logs {\n"
            "      id\n      instanceId\n      instanceName\n      operationType\n"
            "      operationTime\n    }\n  }\n  }",
            {"serviceId": service_id, "endpointName": endpoint_name})


def task_segments(task_id):
    return ("query getProfileTaskSegmentList($taskID: ID!) {\n  segmentList: "
            "getProfileTaskSegments(taskID: $taskID) {\n    traceId\n    instanceId\n"
            "    instanceName\n    endpointNames\n    duration\n    start\n    spans {\n"
            "      spanId\n      parentSpanId\n      segmentId\n      refs {\n        traceId\n"
            "        parentSegmentId\n        parentSpanId\n        type\n      }\n"
            "      serviceCode\n      serviceInstanceName\n      startTime\n      endTime\n"
            "      endpointName\n      type\n      peer\n      component\n      isError\n"
            "      layer\n      tags {\n        key value\n      }\n      logs {\n        time\n"
            "        data {\n          key\n          value\n        }\n      }\n"
            "      profiled\n    }\n  }\n  }", {"taskID": task_id})


def analyze(queries):
    return ("query getProfileAnalyze($queries: [SegmentProfileAnalyzeQuery!]!) {\n  analyze: "
            "getSegmentsProfileAnalyze(queries: $queries) {\n    tip\n    trees {\n"
            "      elements {\n        id\n        parentId\n        codeSignature\n"
            "        duration\n        durationChildExcluded\n        count\n      }\n    }\n"
            "  }\n  }", {"queries": queries})


def task_logs(task_id):
    return ("query profileTaskLogs($taskID: String) {\n  taskLogs: getProfileTaskLogs(taskID: "
            "$taskID) {\n    id\n    instanceId\n    instanceName\n    operationTime\n"
            "    operationType\n  }\n  }", {"taskID": task_id})


def basic_traces(condition):
    return ("query queryTraces($condition: TraceQueryCondition) {\n  data: "
            "queryBasicTraces(condition: $condition) {\n    traces {\n      key: segmentId\n"
            "      endpointNames\n      duration\n      start\n      isError\n      traceIds\n"
            "    }\n  }}", {"condition": condition})


def trace(trace_id):
    return ("query queryTrace($traceId: ID!) {\n  trace: queryTrace(traceId: $traceId) {\n"
            "    spans {\n      traceId\n      segmentId\n      spanId\n      parentSpanId\n"
            "      refs {\n        traceId\n        parentSegmentId\n        parentSpanId\n"
            "        type\n      }\n      serviceCode\n      serviceInstanceName\n"
            "      startTime\n      endTime\n      endpointName\n      type\n      peer\n"
            "      component\n      isError\n      layer\n      tags {\n        key\n"
            "        value\n      }\n      logs {\n        time\n        data {\n          key\n"
            "          value\n        }\n      }\n      attachedEvents {\n        startTime {\n"
            "          seconds\n          nanos\n        }\n        event\n        endTime {\n"
            "          seconds\n          nanos\n        }\n        tags {\n          key\n"
            "          value\n        }\n        summary {\n          key\n          value\n"
            "        }\n      }\n    }\n  }\n  }", {"traceId": trace_id})


def template_change(kind, setting):
    field = {"add": "addTemplate", "change": "changeTemplate"}[kind]
    typ = {"add": "NewDashboardSetting!", "change": "DashboardSetting!"}[kind]
    return ("mutation %sTemplate($setting: %s) {\n  %s(setting: $setting) {\n        id\n"
            "        status\n        message\n    }}" % (kind, typ, field), {"setting": setting})


def template_disable(template_id):
    return ("mutation removeTemplate($id: String!) {\n  disableTemplate(id: $id) {\n        id\n"
            "        status\n        message\n    }}", {"id": template_id})


def pprof_create(request):
    return ("mutation createPprofTask($request: PprofTaskCreationRequest!) {\n  task: "
            "createPprofTask(pprofTaskCreationRequest: $request) {\n    id\n    errorReason\n"
            "    code\n  }\n}", {"request": request})


def pprof_list(request):
    return ("query getPprofTaskList($request: PprofTaskListRequest!) {\n  taskListResult: "
            "queryPprofTaskList(request: $request) {\n    errorReason\n    tasks {\n      id\n"
            "      serviceId\n      serviceInstanceIds\n      createTime\n      events\n"
            "      duration\n      dumpPeriod\n    }\n  }\n}", {"request": request})


def pprof_progress(task_id):
    return ("query getPprofTaskLogs($taskId: String!) {\n  taskLogs: queryPprofTaskProgress("
            "taskId: $taskId) {\n    logs {\n      id\n      instanceId\n      instanceName\n"
            "      operationType\n      operationTime\n    }\n    errorInstanceIds\n"
            "    successInstanceIds\n  }\n}", {"taskId": task_id})


def pprof_analyze(request):
    return ("query getPprofAnalyze($request: PprofAnalyzationRequest!) {\n  analysisResult: "
            "queryPprofAnalyze(request: $request) {\n    tree {\n      elements {\n        id\n"
            "        parentId\n        symbol: codeSignature\n        dumpCount: total\n"
            "        self\n      }\n    }\n  }\n}", {"request": request})


def async_create(request):
    return ("mutation createAsyncProfilerTask($asyncProfilerTaskCreationRequest: "
            "AsyncProfilerTaskCreationRequest!) {\n  task: createAsyncProfilerTask("
            "asyncProfilerTaskCreationRequest: $asyncProfilerTaskCreationRequest) {\n    id\n"
            "    errorReason\n    code\n  }\n}", {"asyncProfilerTaskCreationRequest": request})


def async_list(request):
    return ("query getAsyncTaskList($request: AsyncProfilerTaskListRequest!) {\n  "
            "asyncTaskList: queryAsyncProfilerTaskList(request: $request) {\n    errorReason\n"
            "    tasks {\n      id\n      serviceId\n      serviceInstanceIds\n      createTime\n"
            "      events\n      duration\n      execArgs\n    }\n  }\n}", {"request": request})


def async_progress(task_id):
    return ("query getAsyncProfileTaskProcess($taskId: String!) {\n  taskProgress: "
            "queryAsyncProfilerTaskProgress(taskId: $taskId) {\n    logs {\n      id\n"
            "      instanceId\n      instanceName\n      operationType\n      operationTime\n"
            "    }\n    errorInstanceIds\n    successInstanceIds\n  }\n}", {"taskId": task_id})


def async_analyze(request):
    return ("query getAsyncProfileAnalyze($request: AsyncProfilerAnalyzationRequest!) {\n  "
            "analysisResult: queryAsyncProfilerAnalyze(request: $request) {\n    tree {\n"
            "      type\n      elements {\n        id\n        parentId\n"
            "        symbol: codeSignature\n        dumpCount: total\n        self\n      }\n"
            "    }\n  }\n}", {"request": request})


def strategy_list(service_id):
    return ("query getStrategyList($serviceId: ID!) {\n  strategyList: "
            "queryContinuousProfilingServiceTargets(serviceId: $serviceId) {\n    type\n"
            "    checkItems {\n      type\n      threshold\n      period\n      count\n"
            "      uriList\n      uriRegex\n    }\n  }\n  }", {"serviceId": service_id})


def edit_strategy(request):
    return ("mutation editStrategy($request: ContinuousProfilingPolicyCreation!) {\n  strategy: "
            "setContinuousProfilingPolicy(request: $request) {\n    errorReason\n    status\n"
            "  }\n  }", {"request": request})


def monitoring_instances(service_id, target):
    return ("query queryContinuousProfilingMonitoringInstances($serviceId: ID!, $target: "
            "ContinuousProfilingTargetType!) {\n  instances: "
            "queryContinuousProfilingMonitoringInstances(serviceId: $serviceId, target: "
            "$target) {\n    id\n    name\n    attributes {\n      name\n      value\n    }\n"
            "    triggeredCount\n    lastTriggerTimestamp\n    processes {\n      id\n"
            "      name\n      detectType\n      labels\n      triggeredCount\n"
            "      lastTriggerTimestamp\n    }\n  }\n}", {"serviceId": service_id,
                                                      "target": target})


# ---- eBPF profiling (the eBPF widget and the continuous-profiling task timeline) ----

EBPF_TASK_FIELDS = (
    "    taskId\n    serviceName\n    serviceId\n    serviceInstanceId\n    serviceInstanceName\n"
    "    processLabels\n    processName\n    processId\n    taskStartTime\n    triggerType\n"
    "    fixedTriggerDuration\n    targetType\n    createTime\n    continuousProfilingCauses {\n"
    "      type\n      singleValue {\n        threshold\n        current\n      }\n"
    "      uri {\n        uriRegex\n        uriPath\n        threshold\n        current\n"
    "      }\n      message\n    }\n")


def ebpf_prepare(service_id):
    return ("query queryCreateTaskData($serviceId: ID!) {\n  createTaskData: "
            "queryPrepareCreateEBPFProfilingTaskData(serviceId: $serviceId) {\n"
            "    couldProfiling\n    processLabels\n  }\n}", {"serviceId": service_id})


def ebpf_create(request):
    return ("mutation saveEBPFTask($request: EBPFProfilingTaskFixedTimeCreationRequest!) {\n"
            "  createTaskData: createEBPFProfilingFixedTimeTask(request: $request) {\n"
            "    status\n    errorReason\n    id\n  }\n}", {"request": request})


def ebpf_tasks(variables):
    return ("query getEBPFTasks($serviceId: ID, $serviceInstanceId: ID, $targets: "
            "[EBPFProfilingTargetType!], $triggerType: EBPFProfilingTriggerType) {\n"
            "  queryEBPFTasks: queryEBPFProfilingTasks(serviceId: $serviceId, serviceInstanceId: "
            "$serviceInstanceId, targets: $targets, triggerType: $triggerType) {\n"
            + EBPF_TASK_FIELDS + "  }\n}", variables)


def ebpf_schedules(task_id):
    return ("query getEBPFSchedules($taskId: ID!) {\n  eBPFSchedules: "
            "queryEBPFProfilingSchedules(taskId: $taskId) {\n    scheduleId\n    taskId\n"
            "    process {\n      id\n      name\n      serviceId\n      serviceName\n"
            "      instanceId\n      instanceName\n      agentId\n      detectType\n"
            "      attributes {\n        name\n        value\n      }\n      labels\n    }\n"
            "    startTime\n    endTime\n  }\n}", {"taskId": task_id})


def ebpf_analyze(schedule_ids, time_ranges, aggregate_type):
    return ("query getEBPFResult($scheduleIdList: [ID!]!, $timeRanges: "
            "[EBPFProfilingAnalyzeTimeRange!]!, $aggregateType: "
            "EBPFProfilingAnalyzeAggregateType) {\n  analysisEBPFResult: "
            "analysisEBPFProfilingResult(scheduleIdList: $scheduleIdList, timeRanges: "
            "$timeRanges, aggregateType: $aggregateType) {\n    tip\n    trees {\n"
            "      elements {\n        id\n        parentId\n        symbol\n        stackType\n"
            "        dumpCount\n      }\n    }\n  }\n}",
            {"scheduleIdList": schedule_ids, "timeRanges": time_ranges,
             "aggregateType": aggregate_type})


def ebpf_network_create(request):
    return ("mutation newNetworkProfiling($request: EBPFProfilingNetworkTaskRequest!) {\n"
            "  createEBPFNetworkProfiling(request: $request) {\n    status\n    errorReason\n"
            "    id\n  }\n}", {"request": request})


def ebpf_network_keep(task_id):
    return ("mutation keepNetworkProfiling($taskId: ID!) {\n  keepEBPFNetworkProfiling("
            "taskId: $taskId) {\n    status\n    errorReason\n  }\n}", {"taskId": task_id})

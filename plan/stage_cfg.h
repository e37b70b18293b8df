/*
 * stage_cfg.h — the configuration of global stage s of a plan, as the executor builds it and the
 * memory and cost predictions price it: one mapping, so a prediction sizes exactly what the
 * executor allocates. Plain C (model/stage_size.h holds pp_stage_cfg_t).
 */
#ifndef PP_STAGE_CFG_H
#define PP_STAGE_CFG_H

#include "model/stage_size.h"
#include "model/job.h"
#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stage s of `plan` made from `job`: the split's blocks of stage s (split_stage_layers: even,
 * listed or balanced), the embedding on stage 0, the head on the last, the plan's slot count, AdamW
 * state when the config asks. */
void plan_stage_cfg(pp_stage_cfg_t *c, const pp_job_t *job, const pp_plan_t *plan, int s);

#ifdef __cplusplus
}
#endif

#endif /* PP_STAGE_CFG_H */

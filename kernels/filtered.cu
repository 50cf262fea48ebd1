#include "topk_backends.h"
#include <cstdio>

/* placeholder until the real backend lands */
static int placeholder_supports_filtered(const struct gpu_device_info *device, const struct topk_shape *shape,
                                char *reason, size_t reason_bytes)
{
    (void)device; (void)shape;
    snprintf(reason, reason_bytes, "not built yet");
    return 0;
}
extern "C" const struct topk_backend topk_backend_filtered = {
    "filtered", "placeholder", TOPK_NOT_GUARANTEED, false, false, false, false, "",
    placeholder_supports_filtered, NULL, NULL,
};

/* placeholder until the real backend lands */
static int placeholder_supports_filtered_det(const struct gpu_device_info *device, const struct topk_shape *shape,
                                char *reason, size_t reason_bytes)
{
    (void)device; (void)shape;
    snprintf(reason, reason_bytes, "not built yet");
    return 0;
}
extern "C" const struct topk_backend topk_backend_filtered_det = {
    "filtered-det", "placeholder", TOPK_NOT_GUARANTEED, false, false, false, false, "",
    placeholder_supports_filtered_det, NULL, NULL,
};

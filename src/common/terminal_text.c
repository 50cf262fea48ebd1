/* Escaping text for a terminal (terminal_text.h). */
#include "terminal_text.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "utf8.h"

/* The bytes to write for the sequence at p: itself (*escape false) or its escape. Returns the
 * length of the sequence consumed. */
static size_t next_piece(const uint8_t *p, size_t available, char escape[16], bool *escaped)
{
    size_t length = utf8_sequence_length(p, available);
    bool c1 = length == 2 && p[0] == 0xC2 && p[1] <= 0x9F;
    *escaped = length == 0 || (length == 1 && (p[0] < 0x20 || p[0] == 0x7F)) || c1;
    if (!*escaped)
        return length;
    if (length == 0)
        length = 1;
    if (length == 1 && p[0] == '\n')
        strcpy(escape, "\\n");
    else if (length == 1 && p[0] == '\r')
        strcpy(escape, "\\r");
    else if (length == 1 && p[0] == '\t')
        strcpy(escape, "\\t");
    else if (length == 1)
        snprintf(escape, 16, "\\x%02x", p[0]);
    else
        snprintf(escape, 16, "\\x%02x\\x%02x", p[0], p[1]);
    return length;
}

const char *terminal_safe(const char *text)
{
    static _Thread_local char slots[TERMINAL_SAFE_SLOTS][TERMINAL_SAFE_BYTES];
    static _Thread_local unsigned next_slot;
    if (!text)
        return "(null)";
    const uint8_t *p = (const uint8_t *)text;
    size_t size = strlen(text), at = 0;
    char escape[16];
    bool escaped = false;
    while (at < size && !escaped)
        at += next_piece(p + at, size - at, escape, &escaped);
    if (!escaped)
        return text;
    char *out = slots[next_slot++ % TERMINAL_SAFE_SLOTS];
    size_t used = 0;
    for (at = 0; at < size;) {
        size_t length = next_piece(p + at, size - at, escape, &escaped);
        const char *piece = escaped ? escape : text + at;
        size_t piece_length = escaped ? strlen(escape) : length;
        if (used + piece_length + 4 > TERMINAL_SAFE_BYTES) {
            memcpy(out + used, "...", 4);
            return out;
        }
        memcpy(out + used, piece, piece_length);
        used += piece_length;
        at += length;
    }
    out[used] = '\0';
    return out;
}

void terminal_fputs(const char *text, FILE *out)
{
    const uint8_t *p = (const uint8_t *)(text ? text : "(null)");
    size_t size = strlen((const char *)p);
    char escape[16];
    bool escaped;
    for (size_t at = 0; at < size;) {
        size_t length = next_piece(p + at, size - at, escape, &escaped);
        if (escaped)
            fputs(escape, out);
        else
            fwrite(p + at, 1, length, out);
        at += length;
    }
}

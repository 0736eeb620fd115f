/*
 * Included once by each program that parses configuration under
 * AddressSanitizer (the config unit test and the fuzz harness).
 */
#ifndef CW_LSAN_LIBCONFIG_H
#define CW_LSAN_LIBCONFIG_H

/* LeakSanitizer's built-in suppressions: libconfig 1.5 (Debian 12) leaks
 * the text of a string token when a syntax error follows it (the lexer and
 * strbuf_append() allocate it, the parser's error path drops it, and
 * config_destroy() cannot reach it). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:strbuf_append\nleak:libconfig_yylex\n";
}

#endif

/*
 * main_plan.h — the `ppsched plan` command (main_plan.c), called by main.c with the arguments
 * after "plan". Returns the process exit code.
 */
#ifndef PP_MAIN_PLAN_H
#define PP_MAIN_PLAN_H

int plan_main(int argc, char **argv);

#endif /* PP_MAIN_PLAN_H */

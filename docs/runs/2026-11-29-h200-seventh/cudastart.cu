// Times the parts of a CUDA start (one-off device probe, not part of the project).
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static double ms(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec*1e-6;}
__global__ void k(int *p){ if(p) p[threadIdx.x]=1; }
int main(int argc,char**argv){
  const char*tag=argc>1?argv[1]:"";
  int hold=argc>2?atoi(argv[2]):0;
  double t0=ms();
  CUresult r=cuInit(0); double t1=ms();
  if(argc>3){ int n0=0; cudaGetDeviceCount(&n0); printf("%s init-only %.1f\n",tag,t1-t0); fflush(stdout); usleep(hold*1000); return 0; }
  int n=0; cudaGetDeviceCount(&n); double t2=ms();
  cudaDeviceProp p; cudaGetDeviceProperties(&p,0); double t3=ms();
  cudaSetDevice(0); cudaFree(0); double t4=ms();
  cudaStream_t s; cudaStreamCreateWithFlags(&s,cudaStreamNonBlocking); double t5=ms();
  int*d; cudaMalloc(&d,64<<20); double t6=ms();
  k<<<1,32,0,s>>>(d); cudaStreamSynchronize(s); double t7=ms();
  printf("%s cuInit %.1f (%d) count %.1f props %.1f ctx %.1f stream %.1f malloc %.1f first-kernel %.1f total %.1f\n",
    tag,t1-t0,(int)r,t2-t1,t3-t2,t4-t3,t5-t4,t6-t5,t7-t6,t7-t0);
  fflush(stdout);
  if(hold) usleep(hold*1000);
  return 0;}

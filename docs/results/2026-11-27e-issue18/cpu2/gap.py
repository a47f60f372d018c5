import sys
ev=[]
for i,p in enumerate(sys.argv[2:]):
    for l in open(p):
        if l[0]=='#': continue
        t,k,tid,a,b,c,d=l.split(); ev.append((int(t),'IT'[0] if 0 else p[-4:],k,tid,a,b,c,d))
ev.sort()
posts=[e for e in ev if e[2]=='op_post']
n=int(sys.argv[1]); t0=posts[n][0]
lo=t0-1500000; hi=t0+2000000
for e in ev:
    if lo<=e[0]<=hi and e[2] not in ('landed',):
        print("%8.3f %s %-10s %s %s %s %s %s"%((e[0]-t0)/1e6,e[1],e[2],e[3],e[4],e[5],e[6],e[7]))
